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
import type { Redis } from 'ioredis';
import { format, resolveConfig } from 'prettier';
import { printTable } from '../src/cli/table.js';
import { writeResultsSection } from './support/results-file.js';
import { createRedis } from '../src/redis/connection.js';
import { startRedisServer, type RedisServerHandle } from '../src/redis/redis-server.js';
import { callDependency, startDependency } from '../test/fixtures/breaker-dependency.js';
import { runScenarios } from './breaker-scenarios.js';
import { measureStopping, type TripKind } from './breaker-stop.js';
import { runThroughput, sideLabels, type SideKey, type Work } from './breaker-throughput.js';
import { cleanQueue } from './support/clean-queue.js';
import { SentCommandCounter, totalCalls } from './support/command-counter.js';
import { describeMachine } from './support/machine.js';
import { formatRate } from './support/stats.js';
import { usage, parseOptions, type Options } from './breaker/options.js';
import { sideKeys, throughputRows, stopRows, render, type SideRuns } from './breaker/report.js';

/** Installed before any connection exists, so that every script call is seen. */
const sent = SentCommandCounter.install();

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
