import { performance } from 'node:perf_hooks';
import { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
// The built package, as users run it (`npm run build` first; the bench scripts do).
import { createLogger, createQueue, createWorker } from 'requeue';
import { Countdown } from './support/countdown.js';

/**
 * One timed run of the breaker benchmark's throughput part: pre-load `jobs`
 * jobs, start a worker, time it from `run()` to its last completion. Three
 * sides share the handler: requeue with the queue-level breaker, requeue
 * without it, and a bare BullMQ Worker.
 */

export type SideKey = 'breaker' | 'bullmq' | 'requeue';

export const sideLabels: Record<SideKey, string> = {
  breaker: 'requeue+breaker',
  bullmq: 'bare BullMQ',
  requeue: 'requeue, no breaker',
};

/** What every side's handler does: nothing, or one call to the healthy dependency. */
export type Work = () => Promise<unknown>;

export interface ThroughputRun {
  side: SideKey;
  queueName: string;
  jobs: number;
  concurrency: number;
  /** This run's connection; the caller closes it. */
  connection: Redis;
  work: Work;
  timeoutMs: number;
  /** Called right before the worker starts and right after its last job. */
  window: { start(): Promise<void>; stop(): Promise<void> };
}

/** Retention both sides use: what requeue stamps on every job (src/scheduler/queue.ts). */
const retention = { age: 7 * 24 * 3600, count: 10_000 };
const loadChunk = 1_000;
const logger = createLogger({ level: 'silent' });

/** Runs one side once; returns the timed window's length in ms. */
export async function runThroughput(run: ThroughputRun): Promise<number> {
  return run.side === 'bullmq' ? runBullmq(run) : runRequeue(run);
}

async function runRequeue(run: ThroughputRun): Promise<number> {
  const { connection, queueName, jobs, concurrency, work } = run;
  const queue = createQueue<{ i: number }>(queueName, { connection });
  for (let start = 0; start < jobs; start += loadChunk) {
    const size = Math.min(loadChunk, jobs - start);
    await queue.addBulk(
      Array.from({ length: size }, (_, i) => ({ name: 'bench', data: { i: start + i } })),
    );
  }
  const worker = createWorker(queueName, () => work(), {
    connection,
    concurrency,
    logger,
    autorun: false,
    // The defaults: a queue-level breaker, outcomes flushed every 100 ms or 64 outcomes.
    ...(run.side === 'breaker' ? { breaker: {} } : {}),
  });
  const done = new Countdown(jobs, run.timeoutMs, async () => JSON.stringify(await queue.counts()));
  worker.on('job:completed', done.tick);
  worker.on('error', (err) => console.error(`requeue worker error: ${err.message}`));
  try {
    await worker.waitUntilReady();
    await run.window.start();
    const startedAt = performance.now();
    const running = worker.run();
    const finishedAt = await done.finished.finally(() => run.window.stop());
    await worker.close();
    await running;
    return finishedAt - startedAt;
  } finally {
    await worker.close({ timeoutMs: 1_000 });
    await queue.close();
  }
}

async function runBullmq(run: ThroughputRun): Promise<number> {
  const { connection, queueName, jobs, concurrency, work } = run;
  const queue = new Queue(queueName, { connection });
  for (let start = 0; start < jobs; start += loadChunk) {
    const size = Math.min(loadChunk, jobs - start);
    await queue.addBulk(
      Array.from({ length: size }, (_, i) => ({
        name: 'bench',
        data: { i: start + i },
        opts: { attempts: 1, removeOnComplete: retention, removeOnFail: retention },
      })),
    );
  }
  // The options requeue's worker gives its BullMQ worker, minus the stall override.
  const worker = new Worker(queueName, () => work(), {
    connection,
    concurrency,
    autorun: false,
    lockDuration: 30_000,
    stalledInterval: 30_000,
  });
  const done = new Countdown(jobs, run.timeoutMs, async () =>
    JSON.stringify(await queue.getJobCounts()),
  );
  worker.on('completed', done.tick);
  worker.on('error', (err) => console.error(`BullMQ worker error: ${err.message}`));
  let closed = false;
  try {
    await worker.waitUntilReady();
    await run.window.start();
    const startedAt = performance.now();
    const running = worker.run();
    const finishedAt = await done.finished.finally(() => run.window.stop());
    closed = true;
    await worker.close();
    await running;
    return finishedAt - startedAt;
  } finally {
    if (!closed) await worker.close(true);
    await queue.close();
  }
}
