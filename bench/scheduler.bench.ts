/**
 * requeue vs bare BullMQ on the same Redis, in the same process: jobs/s with
 * no failures, with transient failures, into the DLQ and back out, and what
 * each job costs in Redis commands and CPU time. Not a vitest suite: run it
 * with `npm run bench` (`node --import tsx bench/scheduler.bench.ts --help`).
 */
import { randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import { relative } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { printTable } from '../src/cli/table.js';
import { createRedis } from '../src/redis/connection.js';
import { startRedisServer, type RedisServerHandle } from '../src/redis/redis-server.js';
import { bullmqSide } from './scheduler/bullmq-side.js';
import { parseBenchOptions, usage, type BenchOptions } from './scheduler/options.js';
import {
  commandsTable,
  costTable,
  describeSent,
  rate,
  renderMarkdown,
  resultsTable,
  summarise,
  type Sample,
  type RunReport,
  type Samples,
  type SideKey,
} from './scheduler/report.js';
import { renderJson } from './scheduler/json-report.js';
import { requeueSide } from './scheduler/requeue-side.js';
import { metricIds, metrics, type MetricId, type ScenarioId } from './scheduler/scenarios.js';
import type { Probe, Side } from './scheduler/side.js';
import { cleanQueue } from './support/clean-queue.js';
import { SentCommandCounter } from './support/command-counter.js';
import { CostProbe, type CostSample } from './support/cost-probe.js';
import { describeMachine } from './support/machine.js';
import { describeRevision } from './support/revision.js';
import { writeResultsSection } from './support/results-file.js';
import { formatRate } from './support/stats.js';

/** Installed before any connection exists, so that every script gets its name. */
const sent = SentCommandCounter.install();

/**
 * tsx turns source maps on for the whole process, which makes every
 * `err.stack` read source-mapped: about 45 µs instead of 13 on this machine.
 * BullMQ reads the stack of every failure it stores (requeue never does), so
 * with them on the failure scenarios would charge BullMQ for tsx, not for
 * anything either side's built code does. Off: both sides run as built code
 * runs in production.
 */
process.setSourceMapsEnabled(false);

const sides: Record<SideKey, Side> = { requeue: requeueSide, bullmq: bullmqSide };

/** Jobs per side in the untimed warm-up of a scenario: enough for the JIT to settle. */
function warmUpJobs(jobs: number): number {
  return Math.min(jobs, Math.max(500, Math.round(jobs / 4)));
}

async function main(): Promise<void> {
  let parsed: BenchOptions | 'help';
  try {
    parsed = parseBenchOptions(process.argv.slice(2), process.env);
  } catch (err) {
    // A bad flag: say which, without a stack trace.
    process.stderr.write(`${(err as Error).message}\n\n${usage}`);
    process.exitCode = 2;
    return;
  }
  if (parsed === 'help') {
    process.stdout.write(usage);
    return;
  }
  const options = parsed;
  const startedAt = new Date();
  const clockStart = performance.now();

  let server: RedisServerHandle | undefined;
  let url = options.redisUrl;
  let redisSource = 'the server given by --redis / REDIS_URL';
  if (url === undefined) {
    server = await startRedisServer({ appendonly: false });
    url = server.url;
    redisSource = 'a private redis-server started for the run, appendonly no';
  }
  const admin = createRedis(url);
  try {
    const machine = await describeMachine(admin);
    // Read before the runs: the tree may change while they go on.
    const revision = describeRevision();
    log(`redis ${machine.redis} at ${url.replace(/\/\/[^@]*@/, '//***@')} (${redisSource})`);
    const samples = await runAll(url, admin, options);

    const rows = summarise(samples);
    // With --json, stdout carries the JSON alone and the tables go to stderr.
    const out = options.json ? process.stderr : process.stdout;
    out.write('\n');
    const results = resultsTable(rows);
    printTable(results.header, results.cells, out);
    const commands = commandsTable(samples);
    if (commands) {
      out.write('\nRedis commands per job, scenario 1\n');
      printTable(commands.header, commands.cells, out);
      out.write(`  requeue sent/job: ${describeSent(samples['no-failures']?.requeue)}\n`);
      out.write(`  BullMQ sent/job:  ${describeSent(samples['no-failures']?.bullmq)}\n`);
    }
    const costs = costTable(samples);
    out.write('\nCost per job (median; requeue / BullMQ)\n');
    printTable(costs.header, costs.cells, out);

    const report: RunReport = {
      machine,
      options,
      redisSource,
      privateRedis: server !== undefined,
      command: commandLine(),
      startedAt,
      durationS: (performance.now() - clockStart) / 1000,
      loadAfter: loadavg()[0] ?? 0,
      revision,
      samples,
    };
    if (options.resultsPath !== undefined) {
      await writeResultsSection(options.resultsPath, 'scheduler-bench', renderMarkdown(report));
      log(`wrote ${options.resultsPath}`);
    }
    if (options.json) process.stdout.write(renderJson(report));
  } finally {
    admin.disconnect();
    await server?.stop();
  }
}

/** Every scenario: a warm-up per side, then the timed runs, the side going first alternating. */
async function runAll(url: string, admin: Redis, options: BenchOptions): Promise<Samples> {
  const samples: Samples = {};
  let turn = 0;
  for (const scenario of options.scenarios) {
    const jobs = jobsFor(scenario, options);
    for (const key of ['requeue', 'bullmq'] as const) {
      await runOnce(url, admin, key, scenario, warmUpJobs(jobs), options, false);
    }
    for (let rep = 0; rep < options.repeats; rep += 1) {
      // Neither side always runs first, on a warmer (or busier) box.
      const order: SideKey[] = turn++ % 2 === 0 ? ['requeue', 'bullmq'] : ['bullmq', 'requeue'];
      for (const key of order) {
        const measured = await runOnce(url, admin, key, scenario, jobs, options, true);
        for (const id of metricIds) {
          const sample = measured[id];
          if (!sample) continue;
          (samples[id] ??= { requeue: [], bullmq: [] })[key].push(sample);
          // 4c's requeue runs are 4b's: logged once.
          if (key === 'requeue' && metrics[id].requeueFrom !== undefined) continue;
          log(
            `${id.padEnd(12)} ${sides[key].label.padEnd(8)} #${rep + 1}  ${sample.jobs} jobs ` +
              `in ${(sample.elapsedMs / 1000).toFixed(2)} s → ${formatRate(rate(sample))} jobs/s`,
          );
        }
      }
    }
  }
  return samples;
}

function jobsFor(scenario: ScenarioId, options: BenchOptions): number {
  switch (scenario) {
    case 'no-failures':
      return options.jobs;
    case 'retry-1':
    case 'retry-3':
      return options.retryJobs;
    case 'dead-letter':
      return options.dlqJobs;
  }
}

/** One run on a fresh queue and a fresh connection, its keys deleted afterwards. */
async function runOnce(
  url: string,
  admin: Redis,
  key: SideKey,
  scenario: ScenarioId,
  jobs: number,
  options: BenchOptions,
  measure: boolean,
): Promise<Partial<Record<MetricId, Sample>>> {
  const queueName = `bench-${key}-${scenario}-${randomUUID().slice(0, 8)}`;
  const connection = createRedis(url);
  const costs = new Map<MetricId, CostSample>();
  const probe = (metric: MetricId): Probe => {
    if (!measure) return { start: async () => undefined, stop: async () => undefined };
    const cost = new CostProbe(admin, sent);
    return {
      start: () => cost.start(),
      stop: async () => {
        costs.set(metric, await cost.stop());
      },
    };
  };
  try {
    const timed = await sides[key].run({
      scenario,
      queueName,
      jobs,
      concurrency: options.concurrency,
      connection,
      timeoutMs: options.timeoutMs,
      requeue: { concurrencyLimit: options.concurrencyLimit, retryOrder: options.retryOrder },
      probe,
    });
    const out: Partial<Record<MetricId, Sample>> = {};
    for (const id of metricIds) {
      // A row may show, in the requeue column, another row's runs (4c: 4b's replay).
      const from = key === 'requeue' ? (metrics[id].requeueFrom ?? id) : id;
      const t = timed[from];
      if (t) out[id] = { ...t, cost: costs.get(from) };
    }
    return out;
  } finally {
    await connection.quit().catch(() => connection.disconnect());
    await cleanQueue(admin, queueName);
  }
}

/** The command as typed, e.g. `node --import tsx bench/scheduler.bench.ts --repeats 5`. */
function commandLine(): string {
  const script = relative(process.cwd(), process.argv[1] ?? 'bench/scheduler.bench.ts');
  const node = ['node', ...process.execArgv, script, ...process.argv.slice(2)].join(' ');
  return process.env.npm_lifecycle_event === 'bench' ? `npm run bench → ${node}` : node;
}

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
