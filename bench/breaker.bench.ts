/**
 * What the shared circuit breaker costs when nothing fails, and how fast it
 * stops a fleet when something does. Not a vitest suite: run it with
 * `npm run bench:breaker` (`node --import tsx bench/breaker.bench.ts --help`).
 *
 * 1. requeue with the queue-level breaker vs a bare BullMQ Worker, on a
 *    private redis-server: Redis commands per job and jobs/s, same
 *    concurrency and job count, the order alternating, median of the runs.
 *    requeue without the breaker runs too, for context.
 * 2. Trip → stop: worker processes on a steady stream; after each trip, the
 *    time until the last of them starts its last handler call.
 * 3. `--only flaky`: flaky is not down (`bench/breaker-scenarios.ts`), with
 *    `--reference <checkout>` side by side.
 */
import { randomUUID } from 'node:crypto';
import { relative } from 'node:path';
import { parseArgs } from 'node:util';
import type { Redis } from 'ioredis';
import { format, resolveConfig } from 'prettier';
import { printTable } from '../src/cli/table.js';
import { writeResultsSection } from './support/results-file.js';
import { createRedis } from '../src/redis/connection.js';
import { startRedisServer, type RedisServerHandle } from '../src/redis/redis-server.js';
import { callDependency, startDependency } from '../test/fixtures/breaker-dependency.js';
import { runScenarios } from './breaker-scenarios.js';
import { measureStopping, stopBreaker, type TripKind, type TripSample } from './breaker-stop.js';
import { runThroughput, sideLabels, type SideKey, type Work } from './breaker-throughput.js';
import { cleanQueue } from './support/clean-queue.js';
import { SentCommandCounter, totalCalls } from './support/command-counter.js';
import { describeMachine, type Machine } from './support/machine.js';
import { formatRate, formatRatio, median } from './support/stats.js';

/** Installed before any connection exists, so that every script call is seen. */
const sent = SentCommandCounter.install();

interface Options {
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

const usage = `Usage: node --import tsx bench/breaker.bench.ts [options]

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

function parseOptions(argv: string[]): Options | 'help' {
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

/** Per side and run: jobs/s, commands per job, CPU per job. */
interface SideRuns {
  rate: number[];
  /** Commands sent per job (a script call is one). */
  sentPerJob: number[];
  /** Commands the server executed per job, Lua's own calls included. */
  executedPerJob: number[];
  /** This process's CPU time per job (the worker and the bench), µs. */
  nodeCpuUs: number[];
  /** The server's CPU time per job, µs. */
  redisCpuUs: number[];
  /** The last run's sent commands per job, by name. */
  lastSent: Map<string, number>;
}

const sideKeys: SideKey[] = ['breaker', 'bullmq', 'requeue'];

async function measureThroughput(
  url: string,
  admin: Redis,
  options: Options,
): Promise<Record<SideKey, SideRuns>> {
  const runs = Object.fromEntries(
    sideKeys.map((k) => [
      k,
      {
        rate: [],
        sentPerJob: [],
        executedPerJob: [],
        nodeCpuUs: [],
        redisCpuUs: [],
        lastSent: new Map(),
      } as SideRuns,
    ]),
  ) as Record<SideKey, SideRuns>;
  const dependency = options.dependency ? await startDependency() : undefined;
  let n = 0;
  const work: Work = dependency
    ? () => callDependency(dependency.url, { id: String(n++), data: { key: 'bench' } }, 'bench')
    : async () => undefined;
  try {
    const once = async (side: SideKey, jobs: number, record: boolean): Promise<void> => {
      const queueName = `bench-breaker-${side}-${randomUUID().slice(0, 8)}`;
      const connection = createRedis(url);
      let processedBefore = 0;
      let executed = 0;
      let tally = new Map<string, number>();
      let redisCpuBefore = 0;
      let redisCpu = 0;
      let cpuBefore = process.cpuUsage();
      let cpu = cpuBefore;
      try {
        const elapsedMs = await runThroughput({
          side,
          queueName,
          jobs,
          concurrency: options.concurrency,
          connection,
          work,
          timeoutMs: options.timeoutMs,
          window: {
            async start() {
              redisCpuBefore = await redisCpuUs(admin);
              processedBefore = await commandsProcessed(admin);
              sent.start();
              cpuBefore = process.cpuUsage();
            },
            async stop() {
              cpu = process.cpuUsage(cpuBefore);
              tally = sent.stop();
              // Less the INFO that took the first reading.
              executed = (await commandsProcessed(admin)) - processedBefore - 1;
              redisCpu = (await redisCpuUs(admin)) - redisCpuBefore;
            },
          },
        });
        if (!record) return;
        const r = runs[side];
        r.rate.push((jobs * 1000) / elapsedMs);
        r.sentPerJob.push(totalCalls(tally) / jobs);
        r.executedPerJob.push(executed / jobs);
        r.nodeCpuUs.push((cpu.user + cpu.system) / jobs);
        r.redisCpuUs.push(redisCpu / jobs);
        r.lastSent = new Map([...tally].map(([name, calls]) => [name, calls / jobs]));
        log(
          `throughput ${sideLabels[side].padEnd(20)} ${jobs} jobs in ${(elapsedMs / 1000).toFixed(2)} s → ` +
            `${formatRate(r.rate.at(-1)!)} jobs/s, ${r.sentPerJob.at(-1)!.toFixed(3)} sent/job, ` +
            `${r.executedPerJob.at(-1)!.toFixed(3)} executed/job, CPU µs/job node ` +
            `${r.nodeCpuUs.at(-1)!.toFixed(1)} redis ${r.redisCpuUs.at(-1)!.toFixed(1)}`,
        );
      } finally {
        await connection.quit().catch(() => connection.disconnect());
        await cleanQueue(admin, queueName);
        await deleteMatching(admin, `requeue:{${queueName}}:*`);
      }
    };

    const warmUp = Math.min(options.jobs, 2_000);
    for (const side of sideKeys) await once(side, warmUp, false);
    for (let rep = 0; rep < options.repeats; rep += 1) {
      // Rotate the order, so that no side always runs first (or last) on a warmer box.
      const order = sideKeys.map((_, i) => sideKeys[(i + rep) % sideKeys.length]!);
      for (const side of order) await once(side, options.jobs, true);
    }
  } finally {
    await dependency?.close();
  }
  return runs;
}

/** Deletes the keys matching `pattern` (requeue's own keys of a run's queue). */
async function deleteMatching(admin: Redis, pattern: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await admin.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await admin.unlink(...keys);
  } while (cursor !== '0');
}

/** The server's CPU time so far (user + system), µs, from `INFO cpu`. */
async function redisCpuUs(admin: Redis): Promise<number> {
  const text = await admin.info('cpu');
  const seconds = (field: string): number =>
    Number(new RegExp(`^${field}:([\\d.]+)`, 'm').exec(text)?.[1] ?? NaN);
  return (seconds('used_cpu_user') + seconds('used_cpu_sys')) * 1e6;
}

/** `total_commands_processed`: every command the server ran, Lua's own calls included. */
async function commandsProcessed(admin: Redis): Promise<number> {
  const text = await admin.info('stats');
  return Number(/^total_commands_processed:(\d+)/m.exec(text)?.[1] ?? NaN);
}

interface Row {
  metric: string;
  breaker: string;
  bullmq: string;
  ratio: string;
  target: string;
  met: string;
}

function throughputRows(runs: Record<SideKey, SideRuns>): Row[] {
  const sentB = median(runs.breaker.sentPerJob);
  const sentQ = median(runs.bullmq.sentPerJob);
  const execB = median(runs.breaker.executedPerJob);
  const execQ = median(runs.bullmq.executedPerJob);
  const rateB = median(runs.breaker.rate);
  const rateQ = median(runs.bullmq.rate);
  const nodeB = median(runs.breaker.nodeCpuUs);
  const nodeQ = median(runs.bullmq.nodeCpuUs);
  const redisB = median(runs.breaker.redisCpuUs);
  const redisQ = median(runs.bullmq.redisCpuUs);
  return [
    {
      metric: 'Redis commands per job (sent by the clients; a script call is one)',
      breaker: sentB.toFixed(3),
      bullmq: sentQ.toFixed(3),
      ratio: formatRatio(sentB / sentQ),
      target: '≤ 1.10',
      met: sentB / sentQ <= 1.1 ? 'yes' : 'NO',
    },
    {
      metric: 'Redis commands per job (executed by the server, Lua’s own calls included)',
      breaker: execB.toFixed(3),
      bullmq: execQ.toFixed(3),
      ratio: formatRatio(execB / execQ),
      target: '— (reference)',
      met: 'n/a',
    },
    {
      metric: 'throughput, jobs/s',
      breaker: formatRate(rateB),
      bullmq: formatRate(rateQ),
      ratio: formatRatio(rateB / rateQ),
      target: '≥ 0.95',
      met: rateB / rateQ >= 0.95 ? 'yes' : 'NO',
    },
    {
      metric: 'CPU per job in the worker’s process (worker and bench), µs',
      breaker: nodeB.toFixed(1),
      bullmq: nodeQ.toFixed(1),
      ratio: formatRatio(nodeB / nodeQ),
      target: '— (reference)',
      met: 'n/a',
    },
    {
      metric: 'CPU per job in redis-server, µs',
      breaker: redisB.toFixed(1),
      bullmq: redisQ.toFixed(1),
      ratio: formatRatio(redisB / redisQ),
      target: '— (reference)',
      met: 'n/a',
    },
  ];
}

function stopRows(samples: TripSample[], kinds: TripKind[], workers: number): Row[] {
  const rows: Row[] = [];
  for (const kind of kinds) {
    const stops = samples.filter((s) => s.kind === kind).map((s) => s.stopMs);
    if (stops.length === 0) continue;
    const label =
      kind === 'forced'
        ? 'forced (`BreakerStore.forceOpen`, as `requeue breaker open`)'
        : 'tripped by failures (dependency flipped to 503; from `openedAt`)';
    const med = median(stops);
    const max = Math.max(...stops);
    rows.push(
      {
        metric: `trip → last of ${workers} workers stopped, ${label}, median of ${stops.length}`,
        breaker: `${med} ms`,
        bullmq: '—',
        ratio: '—',
        target: '≤ 100 ms',
        met: med <= 100 ? 'yes' : 'NO',
      },
      {
        metric: `… the same, worst of ${stops.length}`,
        breaker: `${max} ms`,
        bullmq: '—',
        ratio: '—',
        target: '≤ 100 ms',
        met: max <= 100 ? 'yes' : 'NO',
      },
    );
  }
  return rows;
}

function markdownTable(header: string[], cells: string[][]): string {
  return [header, header.map(() => '---'), ...cells].map((r) => `| ${r.join(' | ')} |`).join('\n');
}

function render(input: {
  machine: Machine;
  options: Options;
  command: string;
  startedAt: Date;
  durationS: number;
  rows: Row[];
  runs: Record<SideKey, SideRuns> | undefined;
  samples: TripSample[];
}): string {
  const { machine, options, rows, runs, samples } = input;
  const lines = [
    '## Circuit breaker: overhead when healthy, and trip → stop',
    '',
    `Written by \`bench/breaker.bench.ts\` on ${input.startedAt.toISOString()} ` +
      `(${input.durationS.toFixed(0)} s). Command: \`${input.command}\``,
    '',
    `- Machine: \`${machine.uname}\``,
    `- CPU: ${machine.cpuModel}, ${machine.cores} cores; load average ${machine.loadAverage.toFixed(2)} at start`,
    `- Node ${machine.node}; redis-server ${machine.redis} (private, appendonly no)`,
    '',
    markdownTable(
      ['metric', 'requeue+breaker', 'bare BullMQ', 'ratio', 'target', 'met?'],
      rows.map((r) => [r.metric, r.breaker, r.bullmq, r.ratio, r.target, r.met]),
    ),
    '',
  ];
  if (runs) {
    lines.push(
      '### How the throughput part was run',
      '',
      `- ${options.jobs} jobs per run, pre-loaded with \`addBulk\`; concurrency ${options.concurrency} on every side; ` +
        `an untimed warm-up run per side, then ${options.repeats} timed runs per side, the order rotating; medians reported.`,
      `- Handlers ${options.dependency ? 'call a healthy HTTP dependency on loopback (one GET each)' : 'return at once (a healthy dependency, no failures), so the figures are the overhead'}. ` +
        'A run is timed from `worker.run()` to the completion event of its last job.',
      '- requeue+breaker: `createWorker(…, { breaker: {} })`, the queue-level breaker with its defaults ' +
        '(outcomes flushed every 100 ms or 64 outcomes). Bare BullMQ: `new Worker` with the same lock settings and job retention.',
      '- Sent: every command this process’s ioredis clients sent over the timed window, a Lua script call counting one. ' +
        'Executed: the server’s `total_commands_processed` difference, which also counts the commands the scripts run.',
      '',
      markdownTable(
        [
          'side',
          'jobs/s (median)',
          'every run, jobs/s',
          'sent/job',
          'executed/job',
          'node CPU µs/job',
          'redis CPU µs/job',
        ],
        sideKeys.map((k) => [
          sideLabels[k],
          formatRate(median(runs[k].rate)),
          runs[k].rate.map(formatRate).join(', '),
          median(runs[k].sentPerJob).toFixed(3),
          median(runs[k].executedPerJob).toFixed(3),
          median(runs[k].nodeCpuUs).toFixed(1),
          median(runs[k].redisCpuUs).toFixed(1),
        ]),
      ),
      '',
      `- Run-to-run spread of jobs/s (fastest / slowest run): ${sideKeys
        .map((k) => `${sideLabels[k]} ${formatRatio(spread(runs[k].rate))}`)
        .join(', ')}; load average ${machine.loadAverage.toFixed(2)} at the start. ` +
        'Where the spread dwarfs the gap between the sides, the jobs/s ratio is mostly noise.',
      `- requeue+breaker sent per job (last run): ${describeSent(runs.breaker.lastSent)}`,
      `- bare BullMQ sent per job (last run): ${describeSent(runs.bullmq.lastSent)}`,
      '',
    );
  }
  if (samples.length > 0) {
    lines.push(
      '### How the trip → stop part was run',
      '',
      `- ${options.workers} worker processes (\`test/fixtures/breaker-worker.ts\`), concurrency ${options.workerConcurrency} each, ` +
        'on a steady stream of jobs (a backlog of 2,000 kept topped up, in batches of 100, on a connection of its own) against a healthy HTTP dependency on loopback; ' +
        `breaker \`${JSON.stringify(stopBreaker)}\`.`,
      '- Each child keeps the time its handler last started a call; 500 ms after a trip the bench asks every child ' +
        '(pub/sub) and reads the answers from a Redis list. Stop time = max(last handler start) − trip time, the same ' +
        'machine clock in every process. Forced: trip time is taken just before `forceOpen`. Failures: the dependency ' +
        "answers 503 until the breaker trips (`consecutiveFailures` 20); trip time is the state's `openedAt`. " +
        'Between trips the breaker is closed by hand and the bench waits until every worker calls again.',
      '',
      markdownTable(
        ['trip', 'kind', 'stop (ms)', 'per worker: last start − trip (ms)'],
        samples.map((s, i) => [
          String(i + 1),
          s.kind,
          String(s.stopMs),
          s.reports.map((r) => `${r.worker} ${r.lastStart - s.tripAt}`).join(', '),
        ]),
      ),
      '',
    );
  }
  return lines.join('\n');
}

/** Fastest over slowest of a side's runs. */
function spread(rates: number[]): number {
  return Math.max(...rates) / Math.min(...rates);
}

function describeSent(perJob: Map<string, number>): string {
  return (
    [...perJob.entries()]
      .filter(([, v]) => v >= 0.001)
      .sort((a, b) => b[1] - a[1])
      .map(([name, v]) => `${name} ${v.toFixed(3)}`)
      .join(', ') || '—'
  );
}

async function main(): Promise<void> {
  const parsed = parseOptions(process.argv.slice(2));
  if (parsed === 'help') {
    process.stdout.write(usage);
    return;
  }
  const options = parsed;
  if (options.flaky) {
    const probe = createRedis('redis://127.0.0.1:6379');
    const machine = await describeMachine(probe).finally(() => probe.disconnect());
    await runScenarios({
      roots: [process.cwd(), ...(options.reference ? [options.reference] : [])],
      bursts: 3,
      cases: ['flaky', 'mix', 'mix-503', 'down'],
      resultsPath: options.resultsPath,
      command: commandLine(),
      machine,
      log,
    });
    return;
  }
  const startedAt = new Date();
  const clock = performance.now();
  const server: RedisServerHandle = await startRedisServer({ appendonly: false });
  const admin = createRedis(server.url);
  try {
    const machine = await describeMachine(admin);
    log(`redis ${machine.redis} at ${server.url} (private redis-server, appendonly no)`);
    const runs = options.skipThroughput
      ? undefined
      : await measureThroughput(server.url, admin, options);
    const kinds: TripKind[] = ['forced', 'failures'];
    const samples = options.skipStop
      ? []
      : await measureStopping({
          redisUrl: server.url,
          queueName: `bench-breaker-stop-${randomUUID().slice(0, 8)}`,
          workers: options.workers,
          concurrency: options.workerConcurrency,
          trips: options.trips,
          kinds,
          log,
        });
    const rows = [
      ...(runs ? throughputRows(runs) : []),
      ...stopRows(samples, kinds, options.workers),
    ];
    process.stdout.write('\n');
    printTable(
      ['metric', 'requeue+breaker', 'bare BullMQ', 'ratio', 'target', 'met?'],
      rows.map((r) => [r.metric, r.breaker, r.bullmq, r.ratio, r.target, r.met]),
    );
    if (options.resultsPath !== undefined) {
      const body = render({
        machine,
        options,
        command: commandLine(),
        startedAt,
        durationS: (performance.now() - clock) / 1000,
        rows,
        runs,
        samples,
      });
      // Formatted as `npm run lint` (prettier --check) wants the results file.
      const config = await resolveConfig(options.resultsPath);
      const formatted = await format(body, { ...config, parser: 'markdown' });
      await writeResultsSection(options.resultsPath, 'breaker-bench', formatted);
      log(`wrote ${options.resultsPath}`);
    }
  } finally {
    admin.disconnect();
    await server.stop();
  }
}

/** The command as typed, e.g. `node --import tsx bench/breaker.bench.ts --trips 5`. */
function commandLine(): string {
  const script = relative(process.cwd(), process.argv[1] ?? 'bench/breaker.bench.ts');
  const node = ['node', ...process.execArgv, script, ...process.argv.slice(2)].join(' ');
  return process.env.npm_lifecycle_event === 'bench:breaker'
    ? `npm run bench:breaker (${node})`
    : node;
}

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
