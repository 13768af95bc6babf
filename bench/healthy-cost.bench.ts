/**
 * The healthy path's cost, mechanism by mechanism, in one process: bare
 * BullMQ and requeue's worker with each of its on-by-default mechanisms
 * switched off in turn (`concurrencyLimit`, the retry promoter of
 * `retryOrder: 'first'`), run after one another in rotating order, many
 * times, on one private redis-server. A shared machine's load moves jobs/s
 * far more than it moves CPU time per job, so this reports Node CPU µs and
 * Redis commands sent per job (medians, and each variant's median ratio to
 * the BullMQ run of its own round), and jobs/s likewise. Scenario 1 of
 * `npm run bench` (no failures), 16 slots. BullMQ's timed run (on jobs made
 * as requeue's producer makes them) follows an untimed run on its own jobs on
 * the same connection; with `--pre-run on` (the default) each requeue run
 * follows an untimed run of its own too. `--only` runs some of the requeue
 * variants; `--against DIR` runs them from another tree's build as well, in
 * the same rounds. `node --import tsx bench/healthy-cost.bench.ts [--jobs N]
 * [--rounds R] [--only defaults,limit-off,fifo,both-off] [--against DIR]
 * [--pre-run on|off]` after `npm run build`.
 */
import { randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { formatTable } from '../src/cli/table.js';
import { createRedis } from '../src/redis/connection.js';
import { startRedisServer } from '../src/redis/redis-server.js';
import { bullmqSide } from './scheduler/bullmq-side.js';
import { requeueSide, requeueSideOf, type RequeueLibrary } from './scheduler/requeue-side.js';
import type { RunContext, Side } from './scheduler/side.js';
import { cleanQueue } from './support/clean-queue.js';
import { SentCommandCounter, totalCalls } from './support/command-counter.js';
import { CostProbe, type CostSample } from './support/cost-probe.js';

const sent = SentCommandCounter.install();
process.setSourceMapsEnabled(false);

const { values } = parseArgs({
  options: {
    jobs: { type: 'string', default: '10000' },
    rounds: { type: 'string', default: '9' },
    // A subset of the requeue variants (BullMQ always runs): defaults,limit-off,fifo,both-off.
    only: { type: 'string' },
    // Another tree (its `npm run build` done): its requeue variants run too, in the same rounds.
    against: { type: 'string' },
    // `on`: each requeue run follows an untimed run of its own on the same connection, as
    // BullMQ's timed run (on requeue's jobs) follows its run on its own jobs (bench/RESULTS.md).
    'pre-run': { type: 'string', default: 'on' },
  },
});
const jobs = Number(values.jobs);
if (values['pre-run'] !== 'on' && values['pre-run'] !== 'off')
  throw new Error('--pre-run: on or off');
const preRun = values['pre-run'] === 'on';
const rounds = Number(values.rounds);

type Requeue = RunContext['requeue'];
const allVariants: { id: string; label: string; side: Side; requeue: Requeue }[] = [
  {
    id: 'bullmq',
    label: 'BullMQ',
    side: bullmqSide,
    requeue: { concurrencyLimit: 'on', retryOrder: 'first' },
  },
  {
    id: 'defaults',
    label: 'requeue (defaults)',
    side: requeueSide,
    requeue: { concurrencyLimit: 'on', retryOrder: 'first' },
  },
  {
    id: 'limit-off',
    label: 'requeue, concurrencyLimit off',
    side: requeueSide,
    requeue: { concurrencyLimit: 'off', retryOrder: 'first' },
  },
  {
    id: 'fifo',
    label: 'requeue, retryOrder fifo',
    side: requeueSide,
    requeue: { concurrencyLimit: 'on', retryOrder: 'fifo' },
  },
  {
    id: 'both-off',
    label: 'requeue, both off',
    side: requeueSide,
    requeue: { concurrencyLimit: 'off', retryOrder: 'fifo' },
  },
];
const only = values.only?.split(',');
const unknown = only?.filter((id) => !allVariants.some((v) => v.id === id));
if (unknown?.length) throw new Error(`--only: no variant ${unknown.join(', ')}`);
const chosen = allVariants.filter((v) => v.id === 'bullmq' || !only || only.includes(v.id));
const variants = [...chosen];
if (values.against) {
  const dir = resolve(values.against);
  const lib = (await import(pathToFileURL(`${dir}/dist/src/index.js`).href)) as RequeueLibrary;
  const side = requeueSideOf(lib, `requeue at ${dir}`);
  for (const v of chosen.slice(1)) variants.push({ ...v, label: `${v.label} [${dir}]`, side });
}

const server = await startRedisServer({ appendonly: false });
const admin = createRedis(server.url);
const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** One run's cost, and its jobs per second (BullMQ's: the run on jobs made as requeue's producer makes them). */
async function runOnce(
  v: (typeof variants)[number],
  n: number,
): Promise<{ cost: CostSample; jobsPerSec: number }> {
  const queueName = `cost-${randomUUID().slice(0, 8)}`;
  const connection = createRedis(server.url);
  let cost: CostSample | undefined;
  let jobsPerSec = 0;
  const untimed = { start: async () => undefined, stop: async () => undefined };
  try {
    if (preRun && v.id !== 'bullmq') {
      await v.side.run({
        scenario: 'no-failures',
        queueName: `${queueName}-pre`,
        jobs: n,
        concurrency: 16,
        connection,
        timeoutMs: 300_000,
        requeue: v.requeue,
        probe: () => untimed,
      });
      await cleanQueue(admin, `${queueName}-pre`);
    }
    const result = await v.side.run({
      scenario: 'no-failures',
      queueName,
      jobs: n,
      concurrency: 16,
      connection,
      timeoutMs: 300_000,
      requeue: v.requeue,
      probe: () => {
        const probe = new CostProbe(admin, sent);
        return { start: () => probe.start(), stop: async () => void (cost = await probe.stop()) };
      },
    });
    // bullmqSide times its own jobs, then requeue's: the probe keeps the last, and so does this.
    const timed = result['no-failures-same-jobs'] ?? result['no-failures']!;
    jobsPerSec = (timed.jobs / timed.elapsedMs) * 1000;
  } finally {
    await connection.quit().catch(() => connection.disconnect());
    await cleanQueue(admin, queueName);
  }
  return { cost: cost!, jobsPerSec };
}

const loadBefore = loadavg()[0]!;
const startedAt = new Date();
for (const v of variants) await runOnce(v, Math.min(jobs, 2_000)); // warm-up
const cpu: number[][] = variants.map(() => []);
const cmds: number[][] = variants.map(() => []);
const ratio: number[][] = variants.map(() => []);
const rate: number[][] = variants.map(() => []);
const rateRatio: number[][] = variants.map(() => []);
for (let r = 0; r < rounds; r++) {
  const order = variants.map((_, i) => (i + r) % variants.length);
  const round: number[] = [];
  const roundRate: number[] = [];
  for (const i of order) {
    const { cost: c, jobsPerSec } = await runOnce(variants[i]!, jobs);
    round[i] = c.nodeCpuUs / jobs;
    roundRate[i] = jobsPerSec;
    rate[i]!.push(jobsPerSec);
    cpu[i]!.push(round[i]!);
    cmds[i]!.push(totalCalls(c.sent) / jobs);
  }
  variants.forEach((_, i) => ratio[i]!.push(round[i]! / round[0]!));
  variants.forEach((_, i) => rateRatio[i]!.push(roundRate[i]! / roundRate[0]!));
  process.stderr.write(
    `round ${r + 1}: ${round.map((x) => x.toFixed(1)).join(' / ')} µs/job; ` +
      `${roundRate.map((x) => x.toFixed(0)).join(' / ')} jobs/s\n`,
  );
}
const rows = variants.map((v, i) => [
  v.label,
  median(cpu[i]!).toFixed(1),
  Math.min(...cpu[i]!).toFixed(1),
  median(ratio[i]!).toFixed(3),
  (1 / median(ratio[i]!)).toFixed(3),
  median(cmds[i]!).toFixed(3),
  median(rate[i]!).toFixed(0),
  median(rateRatio[i]!).toFixed(3),
]);
process.stdout.write(
  `healthy path, ${jobs} jobs per run, ${rounds} rounds, concurrency 16, pre-run ${values['pre-run']}; started ${startedAt.toISOString()}, ` +
    `load ${loadBefore.toFixed(1)} → ${loadavg()[0]!.toFixed(1)}\n` +
    formatTable(
      [
        'variant',
        'Node CPU µs/job (median)',
        'min',
        'CPU / BullMQ (median per round)',
        'BullMQ / it',
        'commands sent/job',
        'jobs/s (median)',
        'jobs/s / BullMQ (median per round)',
      ],
      rows,
    ),
);
admin.disconnect();
await server.stop();
