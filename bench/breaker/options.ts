import { parseArgs } from 'node:util';

/**
 * `bench/breaker.bench.ts`'s flags: the usage text and their parser.
 */

export interface Options {
  jobs: number;
  concurrency: number;
  repeats: number;
  trips: number;
  workers: number;
  workerConcurrency: number;
  /** Handlers call a loopback HTTP dependency instead of returning at once. */
  dependency: boolean;
  skipThroughput: boolean;
  skipStop: boolean;
  /** `--only flaky`: the flaky, mix, down and burst scenarios instead. */
  flaky: boolean;
  /** Another built checkout to run beside this one (`--only flaky`). */
  reference: string | undefined;
  resultsPath: string | undefined;
  timeoutMs: number;
}

export const usage = `Usage: node --import tsx bench/breaker.bench.ts [options]

  --jobs <n>                jobs per throughput run (default 20000)
  --concurrency <n>         worker concurrency, every side (default 16)
  --repeats <n>             timed runs per side; the median is reported (default 3)
  --trips <n>               trips of each kind for the stop time (default 10)
  --workers <n>             worker processes for the stop time (default 4)
  --worker-concurrency <n>  concurrency of each of those (default 4)
  --dependency              throughput handlers call a loopback HTTP server (default: return at once)
  --only <part>             throughput | stop | flaky
  --reference <dir>         with --only flaky: another built checkout, run side by side
  --results <path>          results file (default bench/RESULTS.md)
  --no-results              do not write the results file
  --timeout-s <n>           fail a throughput run that takes longer (default 300)
  --help                    show this text
`;

export function parseOptions(argv: string[]): Options | 'help' {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      jobs: { type: 'string' },
      concurrency: { type: 'string' },
      repeats: { type: 'string' },
      trips: { type: 'string' },
      workers: { type: 'string' },
      'worker-concurrency': { type: 'string' },
      dependency: { type: 'boolean' },
      only: { type: 'string' },
      reference: { type: 'string' },
      results: { type: 'string' },
      'no-results': { type: 'boolean' },
      'timeout-s': { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  if (values.help) return 'help';
  if (values.only !== undefined && !['throughput', 'stop', 'flaky'].includes(values.only)) {
    throw new RangeError(`--only must be throughput, stop or flaky, got "${values.only}"`);
  }
  const int = (name: keyof typeof values, fallback: number): number => {
    const raw = values[name];
    if (raw === undefined) return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < 1) {
      throw new RangeError(`--${name} must be an integer ≥ 1, got "${String(raw)}"`);
    }
    return n;
  };
  return {
    jobs: int('jobs', 20_000),
    concurrency: int('concurrency', 16),
    repeats: int('repeats', 3),
    trips: int('trips', 10),
    workers: int('workers', 4),
    workerConcurrency: int('worker-concurrency', 4),
    dependency: values.dependency ?? false,
    skipThroughput: values.only === 'stop',
    skipStop: values.only === 'throughput',
    flaky: values.only === 'flaky',
    reference: values.reference,
    resultsPath: values['no-results'] ? undefined : (values.results ?? 'bench/RESULTS.md'),
    timeoutMs: int('timeout-s', 300) * 1000,
  };
}
