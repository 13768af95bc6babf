import { performance } from 'node:perf_hooks';
import { isDeepStrictEqual } from 'node:util';
// The built package, as users run it (`npm run build` first; the bench scripts do).
import * as builtRequeue from 'requeue';
import type { RequeueJob, RequeueQueue } from 'requeue';
import { Countdown } from '../support/countdown.js';
import {
  httpError,
  replayBatch,
  requeuePolicy,
  requeueStoredOptions,
  scenarioFailures,
} from './scenarios.js';
import { chunks, type RunContext, type RunResult, type Side, type Timed } from './side.js';

/** What of the package a requeue side uses (another build's `dist/src/index.js` has the same). */
export type RequeueLibrary = Pick<
  typeof builtRequeue,
  'createLogger' | 'createQueue' | 'createWorker' | 'DeadLetterQueue'
>;

/** requeue: `createQueue().addBulk`, then `createWorker` with the retry policy. */
export const requeueSide: Side = requeueSideOf(builtRequeue);

/**
 * The requeue side with `lib` as the package: another build of it (a tree's
 * `dist/src/index.js`) can then run beside this one in the same process.
 */
export function requeueSideOf(lib: RequeueLibrary, label = 'requeue'): Side {
  const { createLogger, createQueue, createWorker, DeadLetterQueue } = lib;
  const logger = createLogger({ level: 'silent' });
  return {
    label,
    run: (ctx) => runRequeue(ctx, { createQueue, createWorker, DeadLetterQueue, logger }),
  };
}

async function runRequeue(
  ctx: RunContext,
  lib: Omit<RequeueLibrary, 'createLogger'> & {
    logger: ReturnType<RequeueLibrary['createLogger']>;
  },
): Promise<RunResult> {
  const { createQueue, createWorker, logger } = lib;
  const { connection, queueName, jobs, concurrency } = ctx;
  const failures = scenarioFailures[ctx.scenario];
  const queue = createQueue<{ i: number }>(queueName, { connection });
  for (const chunk of chunks(jobs)) {
    await queue.addBulk(chunk.map((i) => ({ name: 'bench', data: { i } })));
  }
  if (failures.kind === 'permanent') await checkStoredOptions(queue);

  const handler = async (job: RequeueJob<{ i: number }>): Promise<void> => {
    if (failures.kind === 'permanent') throw httpError(400);
    if (job.attempt <= failures.count) throw httpError(503);
  };
  const worker = createWorker(queueName, handler, {
    connection,
    concurrency,
    policy: requeuePolicy,
    logger,
    autorun: false,
    ...(ctx.requeue.concurrencyLimit === 'off' ? { concurrencyLimit: false as const } : {}),
    retryOrder: ctx.requeue.retryOrder,
    // Keep every dead job of the run, so that all of them can be replayed.
    retention: { maxCount: Math.max(10_000, jobs) },
  });
  const done = new Countdown(jobs, ctx.timeoutMs, async () => JSON.stringify(await queue.counts()));
  worker.on(failures.kind === 'permanent' ? 'job:dead-lettered' : 'job:completed', done.tick);
  worker.on('error', (err) => console.error(`requeue worker error: ${err.message}`));
  let closed = false;
  try {
    await worker.waitUntilReady();
    const probe = ctx.probe(ctx.scenario);
    await probe.start();
    const startedAt = performance.now();
    const running = worker.run();
    const finishedAt = await done.finished.finally(() => probe.stop());
    // Closed before the replay: a live worker would dead-letter the replayed jobs again.
    closed = true;
    await worker.close();
    await running;
    const result: RunResult = { [ctx.scenario]: { jobs, elapsedMs: finishedAt - startedAt } };
    if (failures.kind === 'permanent')
      result.replay = await replayAll(queueName, ctx, lib.DeadLetterQueue);
    return result;
  } finally {
    if (!closed) await worker.close({ timeoutMs: 1_000 });
    await queue.close();
  }
}

/**
 * BullMQ's replay reference adds jobs with {@link requeueStoredOptions}: fails
 * if requeue's producer stores anything else, so the two cannot drift apart.
 */
async function checkStoredOptions(queue: RequeueQueue<{ i: number }>): Promise<void> {
  const [job] = await queue.bull.getWaiting(0, 0);
  if (!job) throw new Error('no waiting job to read the stored options of');
  const { jobId, ...rest } = job.opts;
  // As stored: BullMQ's decoding leaves keys it did not find as undefined.
  const stored: unknown = JSON.parse(JSON.stringify(rest));
  if (jobId !== undefined && jobId !== job.id) throw new Error(`jobId ${jobId} is not ${job.id}`);
  if (!isDeepStrictEqual(stored, requeueStoredOptions)) {
    throw new Error(
      `requeue stores job options ${JSON.stringify(stored)}, but BullMQ's replay reference ` +
        `adds ${JSON.stringify(requeueStoredOptions)}: update requeueStoredOptions in scenarios.ts`,
    );
  }
}

/** Times `dlq.replay({})` of every dead job of the run, in batches of {@link replayBatch}. */
async function replayAll(
  queueName: string,
  ctx: RunContext,
  DeadLetterQueue: RequeueLibrary['DeadLetterQueue'],
): Promise<Timed> {
  const dlq = new DeadLetterQueue(queueName, { connection: ctx.connection });
  try {
    const dead = await dlq.count();
    if (dead !== ctx.jobs) throw new Error(`expected ${ctx.jobs} dead jobs, found ${dead}`);
    const probe = ctx.probe('replay');
    await probe.start();
    const startedAt = performance.now();
    const progress = await dlq.replay({}, { batchSize: replayBatch });
    const elapsedMs = performance.now() - startedAt;
    await probe.stop();
    if (progress.done !== ctx.jobs) throw new Error(`replayed ${progress.done} of ${ctx.jobs}`);
    return { jobs: ctx.jobs, elapsedMs };
  } finally {
    await dlq.close();
  }
}
