/**
 * Retry lateness at Redis's default `hz 10` and at `hz 100`, side by side in
 * one run: each job fails once with a 503, its policy retries it after a
 * fixed 200 ms, and lateness is when the retry actually started minus the
 * failure time plus 200 ms. Two private redis-servers, identical but for
 * `hz`, taken in turns. Two loads: "idle", one job at a time (nothing but
 * the retry's own timer wakes the worker; 0–100 ms apart), and "busy", a job added every
 * 0–20 ms (each add wakes the worker early, hiding the timer).
 * `node --import tsx bench/lateness.bench.ts [--jobs N] [--rounds R]`.
 */
import { rm } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { formatTable } from '../src/cli/table.js';
import { createLogger } from '../src/config/logger.js';
import { createRedis } from '../src/redis/connection.js';
import { startRedisServer } from '../src/redis/redis-server.js';
import { createQueue } from '../src/scheduler/queue.js';
import { createWorker } from '../src/scheduler/requeue-worker.js';
import { quantile } from '../src/util/stats.js';

const { values } = parseArgs({
  options: { jobs: { type: 'string', default: '150' }, rounds: { type: 'string', default: '2' } },
});
const jobs = Number(values.jobs);
const rounds = Number(values.rounds);
const delayMs = 200;

type Load = 'idle' | 'busy';

/** The lateness of `jobs` retries, in ms, against a fresh redis-server at `hz`. */
async function measure(hz: number, load: Load): Promise<number[]> {
  const server = await startRedisServer({ appendonly: false, hz });
  const connection = createRedis(server.url);
  const queue = createQueue('lateness', { connection });
  const failedAt = new Map<string, number>();
  const lateness: number[] = [];
  let done = 0;
  let allDone: () => void = () => undefined;
  let retried: () => void = () => undefined;
  const finished = new Promise<void>((resolve) => (allDone = resolve));
  const worker = createWorker(
    'lateness',
    async (job) => {
      const now = performance.timeOrigin + performance.now();
      const failed = failedAt.get(job.id);
      if (failed === undefined) {
        failedAt.set(job.id, performance.timeOrigin + performance.now());
        throw Object.assign(new Error('unavailable'), { status: 503 });
      }
      lateness.push(now - (failed + delayMs));
      done += 1;
      retried();
      if (done === jobs) allDone();
      return 'ok';
    },
    {
      connection,
      concurrency: 16,
      policy: { strategy: 'fixed', baseMs: delayMs, capMs: delayMs, maxAttempts: 2 },
      logger: createLogger({ level: 'silent' }),
    },
  );
  await worker.waitUntilReady();
  // Failures at random phases of Redis's clock.
  for (let i = 0; i < jobs; i += 1) {
    const retriedOnce = new Promise<void>((resolve) => (retried = resolve));
    await queue.add('job', { i });
    if (load === 'idle') await retriedOnce;
    // Idle: up to one 100 ms tick of hz 10 apart, so each failure lands at a random phase.
    await new Promise((r) => setTimeout(r, Math.random() * (load === 'idle' ? 100 : 20)));
  }
  await finished;
  await worker.close({ timeoutMs: 5_000 });
  await queue.close();
  connection.disconnect();
  await server.stop();
  await rm(server.dir, { recursive: true, force: true });
  return lateness;
}

const rows: string[][] = [];
for (const load of ['idle', 'busy'] as const) {
  const samples: Record<number, number[]> = { 10: [], 100: [] };
  for (let round = 0; round < rounds; round += 1) {
    for (const hz of round % 2 === 0 ? [10, 100] : [100, 10]) {
      samples[hz]!.push(...(await measure(hz, load)));
    }
  }
  for (const hz of [10, 100]) {
    const sorted = [...samples[hz]!].sort((a, b) => a - b);
    const ms = (q: number) => `${quantile(sorted, q).toFixed(1)} ms`;
    rows.push([load, `hz ${hz}`, String(sorted.length), ms(0.5), ms(0.9), ms(0.99), ms(1)]);
  }
}
process.stdout.write(
  `retry lateness: actual start − (failure + ${delayMs} ms), ${jobs} jobs × ${rounds} rounds per row, concurrency 16\n` +
    formatTable(['load', 'redis', 'retries', 'p50', 'p90', 'p99', 'max'], rows, {
      align: ['left', 'left', 'right', 'right', 'right', 'right', 'right'],
    }),
);
