import { performance } from 'node:perf_hooks';
import { Queue, UnrecoverableError, Worker, type Job } from 'bullmq';
import { newJobId } from '../../src/util/system.js';
import { cleanQueue } from '../support/clean-queue.js';
import { Countdown } from '../support/countdown.js';
import {
  bullJobOptions,
  httpError,
  replayBatch,
  requeueStoredOptions,
  scenarioFailures,
} from './scenarios.js';
import { chunks, type RunContext, type RunResult, type Side, type Timed } from './side.js';

/** Bare BullMQ: `Queue.addBulk` with BullMQ's own retries, then a `Worker`. */
export const bullmqSide: Side = {
  label: 'BullMQ',
  async run(ctx: RunContext): Promise<RunResult> {
    const { connection, queueName, jobs, concurrency } = ctx;
    const failures = scenarioFailures[ctx.scenario];
    const queue = new Queue(queueName, { connection });
    for (const chunk of chunks(jobs)) {
      await queue.addBulk(chunk.map((i) => ({ name: 'bench', data: { i }, opts: bullJobOptions })));
    }

    const processor = async (job: Job): Promise<void> => {
      if (failures.kind === 'permanent') throw new UnrecoverableError('HTTP 400');
      if (job.attemptsMade < failures.count) throw httpError(503);
    };
    // The options requeue's worker sets (src/scheduler/requeue-worker.ts), minus the stall override.
    const worker = new Worker(queueName, processor, {
      connection,
      concurrency,
      autorun: false,
      lockDuration: 30_000,
      stalledInterval: 30_000,
    });
    const done = new Countdown(jobs, ctx.timeoutMs, async () =>
      JSON.stringify(await queue.getJobCounts()),
    );
    // 'failed' also fires for attempts BullMQ retries; in the permanent scenario there are none.
    worker.on(failures.kind === 'permanent' ? 'failed' : 'completed', done.tick);
    worker.on('error', (err) => console.error(`BullMQ worker error: ${err.message}`));
    let closed = false;
    try {
      await worker.waitUntilReady();
      const probe = ctx.probe(ctx.scenario);
      await probe.start();
      const startedAt = performance.now();
      const running = worker.run();
      const finishedAt = await done.finished.finally(() => probe.stop());
      closed = true;
      await worker.close();
      await running;
      const result: RunResult = { [ctx.scenario]: { jobs, elapsedMs: finishedAt - startedAt } };
      if (ctx.scenario === 'no-failures')
        result['no-failures-same-jobs'] = await onRequeueJobs(ctx);
      if (failures.kind === 'permanent') {
        // In this order: addBulk finds the wait list empty, as requeue's replay does.
        result.replay = await addBulkAgain(queue, ctx);
        result['replay-vs-retry-jobs'] = await retryAllFailed(queue, ctx);
      }
      return result;
    } finally {
      if (!closed) await worker.close(true);
      await queue.close();
    }
  },
};

/**
 * Times a bare Worker, as in the no-failure run, on a queue of its own whose
 * jobs were added as requeue's producer adds them: {@link requeueStoredOptions}
 * and an id from requeue's own `newJobId` each. Against requeue's run, this
 * isolates requeue's worker from the cost of its jobs' ids.
 */
async function onRequeueJobs(ctx: RunContext): Promise<Timed> {
  const { connection, jobs, concurrency } = ctx;
  const queueName = `${ctx.queueName}-same`;
  const queue = new Queue(queueName, { connection });
  const worker = new Worker(queueName, async () => undefined, {
    connection,
    concurrency,
    autorun: false,
    lockDuration: 30_000,
    stalledInterval: 30_000,
  });
  let closed = false;
  try {
    for (const chunk of chunks(jobs)) {
      await queue.addBulk(
        chunk.map((i) => ({
          name: 'bench',
          data: { i },
          opts: { ...requeueStoredOptions, jobId: newJobId() },
        })),
      );
    }
    const done = new Countdown(jobs, ctx.timeoutMs, async () =>
      JSON.stringify(await queue.getJobCounts()),
    );
    worker.on('completed', done.tick);
    await worker.waitUntilReady();
    const probe = ctx.probe('no-failures-same-jobs');
    await probe.start();
    const startedAt = performance.now();
    const running = worker.run();
    const finishedAt = await done.finished.finally(() => probe.stop());
    closed = true;
    await worker.close();
    await running;
    return { jobs, elapsedMs: finishedAt - startedAt };
  } finally {
    if (!closed) await worker.close(true);
    await queue.close();
    await cleanQueue(connection, queueName);
  }
}

/**
 * Times `queue.addBulk` of as many jobs as died, shaped as requeue's replay
 * puts them back: name `bench`, data `{ i }`, the options requeue's producer
 * stores, each with a fresh id from requeue's own `newJobId` (as requeue's
 * producer and replay do), in calls of {@link replayBatch} jobs (as requeue's replay batches
 * them). Building each call's entries is inside the timed window, as
 * requeue's replay reads its records and makes its fresh ids inside its own.
 */
async function addBulkAgain(queue: Queue, ctx: RunContext): Promise<Timed> {
  const { jobs } = ctx;
  const waitingBefore = await queue.getWaitingCount();
  if (waitingBefore !== 0) throw new Error(`expected an empty wait list, found ${waitingBefore}`);
  const probe = ctx.probe('replay');
  await probe.start();
  const startedAt = performance.now();
  for (const chunk of chunks(jobs, replayBatch)) {
    await queue.addBulk(
      chunk.map((i) => ({
        name: 'bench',
        data: { i },
        opts: { ...requeueStoredOptions, jobId: newJobId() },
      })),
    );
  }
  const elapsedMs = performance.now() - startedAt;
  await probe.stop();
  const waiting = await queue.getWaitingCount();
  if (waiting !== jobs) throw new Error(`addBulk left ${waiting} of ${jobs} jobs waiting`);
  return { jobs, elapsedMs };
}

/** Times `queue.retryJobs({ state: 'failed' })`: ids moved inside one queue, a reference. */
async function retryAllFailed(queue: Queue, ctx: RunContext): Promise<Timed> {
  const { jobs } = ctx;
  const failed = await queue.getFailedCount();
  if (failed !== jobs) throw new Error(`expected ${jobs} failed jobs, found ${failed}`);
  const waitingBefore = await queue.getWaitingCount();
  const probe = ctx.probe('replay-vs-retry-jobs');
  await probe.start();
  const startedAt = performance.now();
  await queue.retryJobs({ state: 'failed' });
  const elapsedMs = performance.now() - startedAt;
  await probe.stop();
  const moved = (await queue.getWaitingCount()) - waitingBefore;
  if (moved !== jobs) throw new Error(`retryJobs moved ${moved} of ${jobs} jobs to wait`);
  return { jobs, elapsedMs };
}
