import { performance } from 'node:perf_hooks';
import { Queue, UnrecoverableError, Worker, type Job } from 'bullmq';
import { Countdown } from '../support/countdown.js';
import { bullJobOptions, httpError, scenarioFailures } from './scenarios.js';
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
    // The options requeue's worker sets (src/scheduler/worker.ts), minus the stall override.
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
      if (failures.kind === 'permanent') result.replay = await retryAllFailed(queue, ctx);
      return result;
    } finally {
      if (!closed) await worker.close(true);
      await queue.close();
    }
  },
};

/** Times `queue.retryJobs({ state: 'failed' })`, BullMQ's nearest thing to a DLQ replay. */
async function retryAllFailed(queue: Queue, ctx: RunContext): Promise<Timed> {
  const { jobs } = ctx;
  const failed = await queue.getFailedCount();
  if (failed !== jobs) throw new Error(`expected ${jobs} failed jobs, found ${failed}`);
  const probe = ctx.probe('replay');
  await probe.start();
  const startedAt = performance.now();
  await queue.retryJobs({ state: 'failed' });
  const elapsedMs = performance.now() - startedAt;
  await probe.stop();
  const waiting = await queue.getWaitingCount();
  if (waiting !== jobs) throw new Error(`retryJobs moved ${waiting} of ${jobs} jobs to wait`);
  return { jobs, elapsedMs };
}
