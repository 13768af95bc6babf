/**
 * Due retries behind a backlog of new work (issue 22, item 2): 500 jobs fail
 * once with a fixed 2 s retry; 1.5 s after they were added, 10,000 new 20 ms
 * jobs arrive. One worker, concurrency 16, on a private redis-server started
 * with `--hz 100`. Lateness is the retry's start minus its due time, as the
 * worker's `retry:started` event gives it (the event behind the
 * `requeue_retry_lateness_seconds` histogram, read back from the metrics as
 * a cross-check). `fifo` (BullMQ's order, today's behaviour) and `first`
 * (the default) are taken in turns on fresh servers in one run.
 * `npm run bench:lateness -- [--retries N] [--jobs N] [--rounds R] [--share X] [--concurrency-limit on|off]`.
 */
import { rm } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { formatTable } from '../src/cli/table.js';
import { createLogger } from '../src/config/logger.js';
import { createRedis } from '../src/redis/connection.js';
import { startRedisServer } from '../src/redis/redis-server.js';
import { RequeueMetrics } from '../src/scheduler/metrics.js';
import { createQueue } from '../src/scheduler/queue.js';
import { createWorker } from '../src/scheduler/requeue-worker.js';
import type { RetryOrder } from '../src/scheduler/worker-options.js';
import { quantile } from '../src/util/stats.js';

const { values } = parseArgs({
  options: {
    retries: { type: 'string', default: '500' },
    jobs: { type: 'string', default: '10000' },
    rounds: { type: 'string', default: '1' },
    share: { type: 'string', default: '0.5' },
    'concurrency-limit': { type: 'string', default: 'on' },
  },
});
const retries = Number(values.retries);
const jobs = Number(values.jobs);
const rounds = Number(values.rounds);
const share = Number(values.share);
const limitOff = values['concurrency-limit'] === 'off';
const retryMs = 2_000;
const arriveMs = 1_500;
const workMs = 20;
const concurrency = 16;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Run {
  lateness: number[];
  /** New jobs per second, from their arrival to the last one's completion. */
  newPerSec: number;
  /** Retries the lateness histogram counted within 1 s. */
  histogramWithin1s: number;
}

async function measure(order: RetryOrder): Promise<Run> {
  const server = await startRedisServer({ appendonly: false, hz: 100 });
  const connection = createRedis(server.url);
  // The producer on its own connection, as another process would be: 10,000
  // adds on the worker's connection would hold its fetches back meanwhile.
  const producer = createRedis(server.url);
  const queue = createQueue<{ kind: 'retry' | 'new' }>('lateness', { connection: producer });
  const lateness: number[] = [];
  let newDone = 0;
  let retriesDone = 0;
  let allDone: () => void = () => undefined;
  const finished = new Promise<void>((resolve) => (allDone = resolve));
  let lastNewAt = 0;
  const worker = createWorker<{ kind: 'retry' | 'new' }>(
    'lateness',
    async (job) => {
      if (job.data.kind === 'retry' && job.attempt === 1)
        throw Object.assign(new Error('unavailable'), { status: 503 });
      await sleep(workMs);
      if (job.data.kind === 'new') {
        newDone += 1;
        lastNewAt = performance.now();
      } else retriesDone += 1;
      if (newDone === jobs && retriesDone === retries) allDone();
      return 'ok';
    },
    {
      connection,
      concurrency,
      retryOrder: order,
      retryShare: share,
      ...(limitOff ? { concurrencyLimit: false as const } : {}),
      policy: { strategy: 'fixed', baseMs: retryMs, capMs: retryMs, maxAttempts: 2 },
      logger: createLogger({ level: 'silent' }),
    },
  );
  const metrics = new RequeueMetrics(undefined, { processMetrics: false });
  metrics.watch(worker as never);
  worker.on('retry:started', (e) => lateness.push(e.startedAt - e.scheduledAt));
  await worker.waitUntilReady();
  await queue.addBulk(
    Array.from({ length: retries }, () => ({ name: 'retry', data: { kind: 'retry' as const } })),
  );
  await sleep(arriveMs);
  const arrivedAt = performance.now();
  for (let i = 0; i < jobs; i += 1_000)
    await queue.addBulk(
      Array.from({ length: Math.min(1_000, jobs - i) }, () => ({
        name: 'new',
        data: { kind: 'new' as const },
      })),
    );
  await finished;
  const newPerSec = jobs / ((lastNewAt - arrivedAt) / 1000);
  const histogram = (
    await metrics.registry.getSingleMetric('requeue_retry_lateness_seconds')?.get()
  )?.values;
  const within1s = (
    histogram as { metricName?: string; labels: { le?: number }; value: number }[]
  )?.find((v) => v.metricName?.endsWith('_bucket') && v.labels.le === 1);
  await worker.close({ timeoutMs: 5_000 });
  await queue.close();
  connection.disconnect();
  producer.disconnect();
  await server.stop();
  await rm(server.dir, { recursive: true, force: true });
  return { lateness, newPerSec, histogramWithin1s: Number(within1s?.value ?? NaN) };
}

const runs: Record<RetryOrder, Run[]> = { fifo: [], first: [] };
for (let round = 0; round < rounds; round += 1)
  for (const order of round % 2 === 0 ? (['fifo', 'first'] as const) : (['first', 'fifo'] as const))
    runs[order].push(await measure(order));

const rows: string[][] = [];
for (const order of ['fifo', 'first'] as const) {
  const all = runs[order].flatMap((r) => r.lateness).sort((a, b) => a - b);
  const s = (q: number) => `${(quantile(all, q) / 1000).toFixed(2)} s`;
  const perSec = runs[order].map((r) => Math.round(r.newPerSec));
  const within = runs[order].reduce((n, r) => n + r.histogramWithin1s, 0);
  rows.push([
    order,
    String(all.length),
    s(0.5),
    s(0.99),
    s(1),
    `${within}/${all.length}`,
    perSec.join(', '),
  ]);
}
process.stdout.write(
  `retry lateness under a backlog: ${retries} retries due ${retryMs} ms after failing, ${jobs} new ${workMs} ms jobs ` +
    `${arriveMs} ms after them; concurrency ${concurrency}, redis hz 100, retryShare ${share}, concurrencyLimit ${limitOff ? 'off' : 'on'}, ${rounds} round(s)\n` +
    formatTable(['order', 'retries', 'p50', 'p99', 'max', '≤ 1 s (metric)', 'new jobs/s'], rows, {
      align: ['left', 'right', 'right', 'right', 'right', 'right', 'right'],
    }),
);
