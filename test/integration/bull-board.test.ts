/**
 * Issue 11: bull-board's buttons, and BullMQ's own API behind them, on a
 * requeue queue. bull-board's "retry" calls `job.retry(state)`, "retry all"
 * `queue.retryJobs({ state })`, "promote" `job.promote()`, "clean"
 * `queue.clean(grace, limit, state)`, "add" `queue.add()`, "empty"
 * `queue.drain()`. None of them may get a job dead-lettered with a false
 * reason, and every job stays in exactly one place.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { parseJobState } from '../../src/policy/job-state.js';
import { DeadLetterQueue } from '../../src/scheduler/dlq/dead-letter-queue.js';
import { createQueue } from '../../src/scheduler/queue.js';
import {
  createWorker,
  type Handler,
  type WorkerOptions,
} from '../../src/scheduler/requeue-worker.js';
import type { RequeueJob } from '../../src/scheduler/attempt/context.js';
import { onCleanup } from '../harness/cleanup.js';
import { cleanQueue, connect, jobKey, redisUrl, uniqueQueueName } from '../harness/redis.js';
import { WorkerEventLog } from '../harness/worker-events.js';

const logger = createLogger({ level: 'silent' });
const admin = connect();
afterAll(() => admin.disconnect());

const fast = { strategy: 'fixed', baseMs: 10, capMs: 10, maxAttempts: 3 } as const;

const unavailable = () => Object.assign(new Error('503'), { status: 503 });

/** A handler that answers 503 to its first `n` runs, then 'ok'. */
function failingFirst(n: number): Handler<unknown, unknown> {
  let left = n;
  return async () => {
    if (left > 0) {
      left -= 1;
      throw unavailable();
    }
    return 'ok';
  };
}

interface Seen {
  attempt: number;
  replays: number;
  history: number;
}

function setup(prefix: string) {
  const name = uniqueQueueName(prefix);
  const queue = createQueue(name, { connection: redisUrl() });
  const dlq = new DeadLetterQueue(name, { connection: redisUrl(), logger });
  onCleanup(async () => {
    await dlq.close();
    await queue.close();
    await cleanQueue(admin, name);
  });
  /** Each run of each job as its handler saw it. */
  const seen = new Map<string, Seen[]>();
  const see = (job: RequeueJob<unknown>) =>
    seen.set(job.id, [
      ...(seen.get(job.id) ?? []),
      { attempt: job.attempt, replays: job.replays, history: job.history.length },
    ]);
  function startWorker(handler: Handler<unknown, unknown>, options: WorkerOptions = {}) {
    const worker = createWorker(
      name,
      async (job) => {
        see(job);
        return handler(job);
      },
      { connection: redisUrl(), logger, policy: fast, ...options },
    );
    const events = new WorkerEventLog(worker);
    onCleanup(() => worker.close({ timeoutMs: 5_000 }));
    return { worker, events };
  }
  async function stateOf(id: string) {
    return parseJobState(await admin.hget(jobKey(admin, name, id), 'rq'));
  }
  return { name, queue, dlq, seen, startWorker, stateOf };
}

describe("bull-board's buttons on a requeue queue", () => {
  it("retry on a completed job dead-lettered it as 'worker died during the last attempt'", async () => {
    const t = setup('board-retry');
    const { events } = t.startWorker(failingFirst(2));
    const { id } = await t.queue.add('sync', { n: 1 });
    await events.waitForCount('job:completed', 1);
    // Completed on its third and last attempt; bull-board's "retry" sends it back.
    const job = await t.queue.bull.getJob(id);
    await job!.retry('completed');
    await events.waitForCount('job:completed', 2);

    expect(await t.dlq.count()).toBe(0);
    expect(t.seen.get(id)).toEqual([
      { attempt: 1, replays: 0, history: 0 },
      { attempt: 2, replays: 0, history: 1 },
      { attempt: 3, replays: 0, history: 2 },
      // A new life, like a replay: attempts from 1 again, the history kept.
      { attempt: 1, replays: 1, history: 3 },
    ]);
    const history = (await t.stateOf(id))!.history;
    expect(history.map((r) => r.outcome)).toEqual(['failed', 'failed', 'succeeded', 'succeeded']);
    expect(history.some((r) => r.outcome === 'stalled')).toBe(false);
    expect(await t.queue.counts()).toMatchObject({ completed: 1, failed: 0, dead: 0 });
  });

  it('retry on a job completed at its first attempt records no false stall, and its new life has all its attempts', async () => {
    const t = setup('board-retry-first');
    let runs = 0;
    const { events } = t.startWorker(
      async () => {
        runs += 1;
        // The first run succeeds; the re-run fails for good after its own two attempts.
        if (runs > 1) throw unavailable();
        return 'ok';
      },
      { policy: { ...fast, maxAttempts: 2 } },
    );
    const { id } = await t.queue.add('sync', { n: 1 });
    await events.waitForCount('job:completed', 1);
    await (await t.queue.bull.getJob(id))!.retry('completed');
    const [dead] = await events.waitForCount('job:dead-lettered', 1);

    expect(t.seen.get(id)?.map((s) => [s.attempt, s.replays])).toEqual([
      [1, 0],
      [1, 1],
      [2, 1],
    ]);
    expect(dead!.record).toMatchObject({ reason: 'max-attempts', attempts: 2 });
    expect(dead!.record.message).not.toContain('worker died');
    const record = await t.dlq.get(id);
    expect(record?.history.map((r) => r.outcome)).toEqual(['failed', 'failed']);
    expect(await t.queue.counts()).toMatchObject({ completed: 0, failed: 0, dead: 1 });
  });

  it('retry all completed (retryJobs) runs each again once, in a new life', async () => {
    const t = setup('board-retry-all');
    const { events } = t.startWorker(async () => 'ok');
    const ids = [];
    for (let i = 0; i < 5; i += 1) ids.push((await t.queue.add('sync', { i })).id);
    await events.waitForCount('job:completed', 5);
    await t.queue.bull.retryJobs({ state: 'completed' });
    await events.waitForCount('job:completed', 10);
    for (const id of ids)
      expect(t.seen.get(id)?.map((s) => [s.attempt, s.replays])).toEqual([
        [1, 0],
        [1, 1],
      ]);
    expect(await t.queue.counts()).toMatchObject({ completed: 5, failed: 0, dead: 0 });
  });

  it("retry with BullMQ's resetAttemptsStarted keeps the history and the attempt count right", async () => {
    const t = setup('board-retry-reset');
    const { events } = t.startWorker(failingFirst(1));
    const { id } = await t.queue.add('sync', { n: 1 });
    await events.waitForCount('job:completed', 1);
    // (With resetAttemptsMade as well the job looks new to requeue: see the README.)
    await (await t.queue.bull.getJob(id))!.retry('completed', { resetAttemptsStarted: true });
    await events.waitForCount('job:completed', 2);
    expect(t.seen.get(id)?.map((s) => [s.attempt, s.replays, s.history])).toEqual([
      [1, 0, 0],
      [2, 0, 1],
      [1, 1, 2],
    ]);
    expect((await t.stateOf(id))!.history).toHaveLength(3);
  });

  it('promote runs a scheduled retry now, as its next attempt', async () => {
    const t = setup('board-promote');
    let runs = 0;
    const { events } = t.startWorker(
      async () => {
        runs += 1;
        if (runs === 1) throw unavailable();
        return 'ok';
      },
      // A retry an hour away: only promote brings it back within the test.
      { policy: { strategy: 'fixed', baseMs: 3_600_000, capMs: 3_600_000, maxAttempts: 3 } },
    );
    const { id } = await t.queue.add('sync', { n: 1 });
    await events.waitForCount('retry:scheduled', 1);
    await (await t.queue.bull.getJob(id))!.promote();
    await events.waitForCount('job:completed', 1);
    expect(t.seen.get(id)?.map((s) => s.attempt)).toEqual([1, 2]);
    expect(await t.queue.counts()).toMatchObject({ completed: 1, delayed: 0, dead: 0 });
  });

  it('a job added with BullMQ directly, clean and empty leave every job in one place and the DLQ alone', async () => {
    const t = setup('board-add-clean');
    // A dead job first: the DLQ must not be touched by BullMQ's clean or drain.
    const { events } = t.startWorker(async (job) => {
      if ((job.data as { die?: boolean }).die)
        throw Object.assign(new Error('400'), { status: 400 });
      return 'ok';
    });
    const dead = await t.queue.add('sync', { die: true });
    await events.waitForCount('job:dead-lettered', 1);
    // bull-board's "add": BullMQ's own add, no requeue options.
    const added = await t.queue.bull.add('plain', { n: 2 });
    await events.waitForCount('job:completed', 1);
    expect(t.seen.get(String(added.id))?.map((s) => s.attempt)).toEqual([1]);
    // "clean" completed, "empty" the waiting list.
    await t.queue.bull.clean(0, 1000, 'completed');
    await t.queue.bull.drain();
    expect(await t.queue.counts()).toMatchObject({
      completed: 0,
      waiting: 0,
      failed: 0,
      dead: 1,
    });
    expect((await t.dlq.get(dead.id))?.reason).toBe('permanent-error');
  });
});
