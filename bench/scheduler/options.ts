import { parseArgs } from 'node:util';
import { scenarioIds, type ScenarioId } from './scenarios.js';

/** What one run of the scheduler benchmark does. */
export interface BenchOptions {
  /** Jobs per run of the no-failure scenario. @defaultValue `20_000` */
  jobs: number;
  /** Jobs per run of the retry scenarios. @defaultValue `5_000` */
  retryJobs: number;
  /** Jobs per run of the dead-letter and replay scenario. @defaultValue `5_000` */
  dlqJobs: number;
  /** Worker concurrency, the same on both sides. @defaultValue `16` */
  concurrency: number;
  /** Runs of each scenario per side; the median is reported. @defaultValue `5` */
  repeats: number;
  /** A Redis to use instead of a private `redis-server`. @defaultValue `REDIS_URL`, else a private server */
  redisUrl: string | undefined;
  /** The scenarios to run. @defaultValue all */
  scenarios: ScenarioId[];
  /** Where the results section goes; `undefined` writes nothing. @defaultValue `bench/RESULTS.md` */
  resultsPath: string | undefined;
  /** A run that has not finished after this long fails. @defaultValue `180_000` */
  timeoutMs: number;
  /** Print the results as JSON on stdout (the tables go to stderr). @defaultValue `false` */
  json: boolean;
  /** requeue's `concurrencyLimit`: `on` is the worker's default, `off` passes `false`. @defaultValue `'on'` */
  concurrencyLimit: 'on' | 'off';
  /** requeue's `retryOrder` (`first`, the default, runs the retry promoter). @defaultValue `'first'` */
  retryOrder: 'first' | 'fifo';
}

export const usage = `Usage: node --import tsx bench/scheduler.bench.ts [options]

  --jobs <n>          jobs per no-failure run (default 20000)
  --retry-jobs <n>    jobs per retry run (default 5000)
  --dlq-jobs <n>      jobs per dead-letter/replay run (default 5000)
  --concurrency <n>   worker concurrency on both sides (default 16)
  --repeats <n>       runs per scenario and side; the median is reported (default 5)
  --redis <url>       use this Redis instead of a private redis-server (or set REDIS_URL)
  --only <ids>        comma-separated subset of: ${scenarioIds.join(', ')}
  --results <path>    results file to update (default bench/RESULTS.md)
  --no-results        do not write the results file
  --timeout-s <n>     fail a run that takes longer (default 180)
  --concurrency-limit <on|off>
                      requeue's own concurrency limit (default on, the worker's default)
  --retry-order <first|fifo>
                      requeue's retryOrder (default first: the retry promoter runs)
  --json              print the results as JSON on stdout, the tables on stderr
                      (through npm: npm run -s bench -- --json, or npm's banner
                      lands on stdout too)
  --help              show this text
`;

/** Parses the command line; throws a RangeError naming the bad flag. */
export function parseBenchOptions(argv: string[], env: NodeJS.ProcessEnv): BenchOptions | 'help' {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      jobs: { type: 'string' },
      'retry-jobs': { type: 'string' },
      'dlq-jobs': { type: 'string' },
      concurrency: { type: 'string' },
      repeats: { type: 'string' },
      redis: { type: 'string' },
      only: { type: 'string' },
      results: { type: 'string' },
      'no-results': { type: 'boolean' },
      'timeout-s': { type: 'string' },
      json: { type: 'boolean' },
      'concurrency-limit': { type: 'string' },
      'retry-order': { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  if (values.help) return 'help';
  return {
    jobs: positiveInt(values, 'jobs', 20_000),
    retryJobs: positiveInt(values, 'retry-jobs', 5_000),
    dlqJobs: positiveInt(values, 'dlq-jobs', 5_000),
    concurrency: positiveInt(values, 'concurrency', 16),
    repeats: positiveInt(values, 'repeats', 5),
    redisUrl: values.redis ?? (env.REDIS_URL || undefined),
    scenarios: parseScenarios(values.only),
    resultsPath: values['no-results'] ? undefined : (values.results ?? 'bench/RESULTS.md'),
    timeoutMs: positiveInt(values, 'timeout-s', 180) * 1000,
    json: values.json ?? false,
    concurrencyLimit: oneOf(values, 'concurrency-limit', ['on', 'off'] as const, 'on'),
    retryOrder: oneOf(values, 'retry-order', ['first', 'fifo'] as const, 'first'),
  };
}

function oneOf<const T extends string>(
  values: Record<string, unknown>,
  name: string,
  allowed: readonly T[],
  fallback: T,
): T {
  const raw = values[name];
  if (raw === undefined) return fallback;
  if (!(allowed as readonly unknown[]).includes(raw)) {
    throw new RangeError(`--${name} must be one of ${allowed.join(', ')}, got "${String(raw)}"`);
  }
  return raw as T;
}

function positiveInt(values: Record<string, unknown>, name: string, fallback: number): number {
  const raw = values[name];
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) {
    throw new RangeError(`--${name} must be an integer ≥ 1, got "${String(raw)}"`);
  }
  return value;
}

function parseScenarios(raw: string | undefined): ScenarioId[] {
  if (raw === undefined) return [...scenarioIds];
  const ids = raw.split(',').map((s) => s.trim());
  for (const id of ids) {
    if (!(scenarioIds as readonly string[]).includes(id)) {
      throw new RangeError(`--only: unknown scenario "${id}"; known: ${scenarioIds.join(', ')}`);
    }
  }
  return ids as ScenarioId[];
}
