/**
 * Issue 25, item 5: a BullMQ app moved onto requeue keeps working. BullMQ's
 * own classes (QueueEvents, FlowProducer, Queue) against requeue workers:
 * every death is BullMQ's `failed` event on the queue's stream (a retry is
 * not); flows' failure options do what BullMQ documents; a child replayed
 * from the DLQ completes its waiting parent; a dead job's deduplication id is
 * free again. Throughout, BullMQ's failed sets stay empty (promise 1).
 */
import { randomUUID } from 'node:crypto';
import { FlowProducer, Queue, QueueEvents, UnrecoverableError, type Job } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { scriptDefinitions } from '../../src/redis/scripts.js';
import { PermanentError } from '../../src/errors/permanent-error.js';
import { DeadLetterQueue } from '../../src/scheduler/dlq/dead-letter-queue.js';
import { createWorker, type Handler } from '../../src/scheduler/requeue-worker.js';
import { onCleanup } from '../harness/cleanup.js';
import { bullPrefixOf, cleanQueue, connect, jobKey, redisUrl } from '../harness/redis.js';
import { WorkerEventLog } from '../harness/worker-events.js';

const logger = createLogger({ level: 'silent' });
const admin = connect();
afterAll(() => admin.disconnect());

const fast = { strategy: 'fixed', baseMs: 10, capMs: 10, maxAttempts: 3 } as const;

/** Queue names of one test sharing a hash tag: a flow's queues in one cluster slot, as BullMQ needs. */
function names(...roles: string[]): string[] {
  const tag = `{i${randomUUID().slice(0, 8)}}`;
  return roles.map((role) => `${tag}${role}`);
}

/** A requeue worker on `name`, its events logged, closed and its queue's keys deleted after the test. */
function worker(name: string, handler: Handler<unknown, unknown>) {
  const w = createWorker(name, handler, { connection: redisUrl(), logger, policy: fast });
  const events = new WorkerEventLog(w);
  const dlq = new DeadLetterQueue(name, { connection: redisUrl(), logger });
  onCleanup(async () => {
    await w.close({ timeoutMs: 5_000 });
    await dlq.close();
    await cleanQueue(admin, name);
  });
  return { worker: w, events, dlq };
}

/** BullMQ's own classes on queue `name`, with requeue's key prefix for it. */
function bullOpts(name: string) {
  const connection = connect();
  onCleanup(() => connection.disconnect());
  return { connection, prefix: bullPrefixOf(admin, name) };
}

function bullQueue(name: string): Queue {
  const queue = new Queue(name, bullOpts(name));
  onCleanup(() => queue.close());
  return queue;
}

function flowProducer(name: string): FlowProducer {
  const flows = new FlowProducer(bullOpts(name));
  onCleanup(() => flows.close());
  return flows;
}

/** BullMQ's QueueEvents on `name`, reading its stream from the start: no event missed. */
async function queueEvents(name: string) {
  const events = new QueueEvents(name, { ...bullOpts(name), lastEventId: '0-0' });
  onCleanup(() => events.close());
  const log: { event: string; args: { jobId: string; [field: string]: unknown } }[] = [];
  const waiters = new Set<() => void>();
  for (const event of ['failed', 'completed'] as const)
    events.on(event, (args: { jobId: string }) => {
      log.push({ event, args });
      for (const wake of waiters) wake();
    });
  await events.waitUntilReady();
  return {
    /** The `failed` events read so far. */
    failed: () => log.filter((e) => e.event === 'failed').map((e) => e.args),
    /** Resolves once `event` for `jobId` has been read: every earlier event has been read too. */
    seen: (event: 'completed' | 'failed', jobId: string) =>
      new Promise<void>((resolve) => {
        const check = () => {
          if (!log.some((e) => e.event === event && e.args.jobId === jobId)) return;
          waiters.delete(check);
          resolve();
        };
        waiters.add(check);
        check();
      }),
  };
}

async function failedSetSize(name: string): Promise<number> {
  return admin.zcard(`${bullPrefixOf(admin, name)}:${name}:failed`);
}

const unavailable = () => Object.assign(new Error('503 upstream'), { status: 503 });

describe("BullMQ's `failed` event for a death (issue 25, item 5)", () => {
  it('QueueEvents sees `failed` for a dead-lettered job with its reason, and not for a retried one', async () => {
    const [name] = names('events') as [string];
    let flaky = 1;
    const { events } = worker(name, async (job) => {
      if (job.name === 'permanent') throw new PermanentError('the partner refused the payload');
      if (flaky-- > 0) throw unavailable();
      return 'ok';
    });
    const qe = await queueEvents(name);
    const queue = bullQueue(name);
    const dead = await queue.add('permanent', {});
    const retried = await queue.add('flaky', {});
    const death = await events.waitFor('job:dead-lettered', (e) => e.jobId === dead.id);
    await events.waitFor('job:completed', (e) => e.jobId === retried.id);
    await qe.seen('completed', retried.id!);
    await qe.seen('failed', dead.id!);

    expect(events.all('retry:scheduled').map((e) => e.jobId)).toEqual([retried.id]);
    expect(qe.failed()).toEqual([
      {
        jobId: dead.id,
        failedReason: 'the partner refused the payload',
        prev: 'active',
        attemptsMade: '1',
        deadReason: 'permanent-error',
      },
    ]);
    expect(death.record.message).toBe('the partner refused the payload');
    // The job is in the DLQ, not in BullMQ's failed set.
    expect(await failedSetSize(name)).toBe(0);
    expect(await admin.exists(jobKey(admin, name, dead.id!))).toBe(1); // the keyless re-send marker only
    expect(await admin.hget(jobKey(admin, name, dead.id!), 'rqgone')).not.toBeNull();
  });

  it('a job out of attempts: `failed` once, with the attempts it made', async () => {
    const [name] = names('spent') as [string];
    const { events } = worker(name, async () => {
      throw unavailable();
    });
    const qe = await queueEvents(name);
    const job = await bullQueue(name).add('always', {});
    await events.waitFor('job:dead-lettered', (e) => e.jobId === job.id);
    await qe.seen('failed', job.id!);
    expect(qe.failed()).toHaveLength(1);
    expect(qe.failed()[0]).toMatchObject({
      jobId: job.id,
      failedReason: '503 upstream',
      attemptsMade: '3',
      deadReason: 'max-attempts',
    });
    expect(events.all('retry:scheduled')).toHaveLength(2);
    expect(await failedSetSize(name)).toBe(0);
  });

  it("BullMQ's UnrecoverableError was retried as an unknown error: now dead at once, `failed` with its message", async () => {
    const [name] = names('unrecoverable') as [string];
    const { events } = worker(name, async () => {
      throw new UnrecoverableError('account closed');
    });
    const qe = await queueEvents(name);
    const job = await bullQueue(name).add('charge', {});
    const death = await events.waitFor('job:dead-lettered', (e) => e.jobId === job.id);
    await qe.seen('failed', job.id!);
    expect(events.all('retry:scheduled')).toEqual([]);
    expect(death.record).toMatchObject({ reason: 'permanent-error', message: 'account closed' });
    expect(qe.failed()[0]).toMatchObject({ failedReason: 'account closed', attemptsMade: '1' });
    expect(await failedSetSize(name)).toBe(0);
  });
});

describe('flows: a parent learns that its child died (issue 25, item 5)', () => {
  /** A parent and a child queue, each with a requeue worker; the child dies unless `childOk`. */
  function flow(options: { childOk?: () => boolean } = {}) {
    const [parentQ, childQ] = names('parents', 'kids') as [string, string];
    const parentRuns: Job[] = [];
    const parent = worker(parentQ, async (job) => {
      parentRuns.push(job.bullJob);
      return { children: await job.bullJob.getChildrenValues() };
    });
    const child = worker(childQ, async (job) => {
      if (job.name === 'later') return 'later done';
      if (options.childOk?.()) return 'child done';
      throw new PermanentError('child cannot do it');
    });
    const add = (opts: Record<string, unknown>) =>
      flowProducer(parentQ).add({
        name: 'parent',
        queueName: parentQ,
        prefix: bullPrefixOf(admin, parentQ),
        children: [{ name: 'child', queueName: childQ, prefix: bullPrefixOf(admin, childQ), opts }],
      });
    return { parentQ, childQ, parent, child, parentRuns, add };
  }

  it('failParentOnFailure dead-letters the parent, without running it, with a reason naming the child', async () => {
    const f = flow();
    const qe = await queueEvents(f.parentQ);
    const tree = await f.add({ failParentOnFailure: true });
    const parentId = tree.job.id!;
    const childId = tree.children![0]!.job.id!;
    await f.child.events.waitFor('job:dead-lettered', (e) => e.jobId === childId);
    const { record } = await f.parent.events.waitFor(
      'job:dead-lettered',
      (e) => e.jobId === parentId,
    );
    expect(record.reason).toBe('child-failed');
    expect(record.message).toBe(`child ${jobKey(admin, f.childQ, childId)} failed`);
    expect(record.attempts).toBe(0);
    expect(f.parentRuns).toEqual([]);
    await qe.seen('failed', parentId);
    expect(qe.failed()).toMatchObject([
      { jobId: parentId, failedReason: record.message, deadReason: 'child-failed' },
    ]);
    expect(await f.parent.dlq.get(parentId)).toMatchObject({ reason: 'child-failed' });
    expect(await failedSetSize(f.parentQ)).toBe(0);
    expect(await failedSetSize(f.childQ)).toBe(0);
  });

  it('a flow failed by its child recovers: replay the child, then the parent, and the parent completes with its result', async () => {
    let fixed = false;
    const f = flow({ childOk: () => fixed });
    const tree = await f.add({ failParentOnFailure: true });
    const parentId = tree.job.id!;
    const childId = tree.children![0]!.job.id!;
    await f.parent.events.waitFor('job:dead-lettered', (e) => e.jobId === parentId);
    // Later than the five minutes a keyless death's re-send marker lasts: no hash under the parent's id.
    await admin.del(jobKey(admin, f.parentQ, parentId));
    fixed = true;
    expect(await f.child.dlq.replay({ id: childId })).toMatchObject({ done: 1 });
    await f.child.events.waitFor('job:completed', (e) => e.jobId === childId);
    expect(await f.parent.dlq.replay({ id: parentId })).toMatchObject({ done: 1 });
    const done = await f.parent.events.waitFor('job:completed', (e) => e.jobId === parentId);
    expect(done.result).toEqual({
      children: { [jobKey(admin, f.childQ, childId)]: 'child done' },
    });
    expect(await failedSetSize(f.parentQ)).toBe(0);
  });

  it('a flow failed by its child recovers in the other order too: the replayed parent waits for its child', async () => {
    let fixed = false;
    const f = flow({ childOk: () => fixed });
    const tree = await f.add({ failParentOnFailure: true });
    const parentId = tree.job.id!;
    const childId = tree.children![0]!.job.id!;
    await f.parent.events.waitFor('job:dead-lettered', (e) => e.jobId === parentId);
    fixed = true;
    expect(await f.parent.dlq.replay({ id: parentId })).toMatchObject({ done: 1 });
    expect(await bullQueue(f.parentQ).getJobState(parentId)).toBe('waiting-children');
    expect(f.parentRuns).toEqual([]);
    expect(await f.child.dlq.replay({ id: childId })).toMatchObject({ done: 1 });
    const done = await f.parent.events.waitFor('job:completed', (e) => e.jobId === parentId);
    expect(done.result).toEqual({
      children: { [jobKey(admin, f.childQ, childId)]: 'child done' },
    });
    expect(await failedSetSize(f.parentQ)).toBe(0);
  });

  it('ignoreDependencyOnFailure: the parent goes on, the failure among its ignored ones', async () => {
    const f = flow();
    const tree = await f.add({ ignoreDependencyOnFailure: true });
    const parentId = tree.job.id!;
    const childKey = jobKey(admin, f.childQ, tree.children![0]!.job.id!);
    await f.parent.events.waitFor('job:completed', (e) => e.jobId === parentId);
    expect(f.parentRuns).toHaveLength(1);
    expect(await f.parentRuns[0]!.getIgnoredChildrenFailures()).toEqual({
      [childKey]: 'child cannot do it',
    });
    expect(await failedSetSize(f.childQ)).toBe(0);
  });

  it('removeDependencyOnFailure: the parent goes on without the child', async () => {
    const f = flow();
    const tree = await f.add({ removeDependencyOnFailure: true });
    const parentId = tree.job.id!;
    await f.parent.events.waitFor('job:completed', (e) => e.jobId === parentId);
    expect(f.parentRuns).toHaveLength(1);
    expect(await f.parentRuns[0]!.getIgnoredChildrenFailures()).toEqual({});
    expect(await f.parentRuns[0]!.getDependenciesCount()).toMatchObject({
      processed: 0,
      unprocessed: 0,
    });
    expect(await failedSetSize(f.childQ)).toBe(0);
  });

  it('continueParentOnFailure: the parent runs as soon as the child dies, its other children still pending', async () => {
    const [parentQ, childQ] = names('parents', 'kids') as [string, string];
    const seen: { failed: Record<string, string>; unprocessed: number | undefined }[] = [];
    const parent = worker(parentQ, async (job) => {
      const failed = await job.bullJob.getFailedChildrenValues();
      const { unprocessed } = await job.bullJob.getDependenciesCount({ unprocessed: true });
      seen.push({ failed, unprocessed });
      // What BullMQ's guide has such a parent do with the children left.
      await job.bullJob.removeUnprocessedChildren();
      return 'parent done';
    });
    worker(childQ, async () => {
      throw new PermanentError('child cannot do it');
    });
    const prefix = bullPrefixOf(admin, childQ);
    const tree = await flowProducer(parentQ).add({
      name: 'parent',
      queueName: parentQ,
      prefix: bullPrefixOf(admin, parentQ),
      children: [
        { name: 'dies', queueName: childQ, prefix, opts: { continueParentOnFailure: true } },
        // Due in an hour: still pending when the parent runs.
        { name: 'later', queueName: childQ, prefix, opts: { delay: 3_600_000 } },
      ],
    });
    const dying = tree.children!.find((c) => c.job.name === 'dies')!.job.id!;
    await parent.events.waitFor('job:completed', (e) => e.jobId === tree.job.id);
    expect(seen).toEqual([
      { failed: { [jobKey(admin, childQ, dying)]: 'child cannot do it' }, unprocessed: 1 },
    ]);
    expect(await failedSetSize(childQ)).toBe(0);
  });

  it('a child replayed from the DLQ completes the parent that waited for it', async () => {
    let fixed = false;
    const f = flow({ childOk: () => fixed });
    const tree = await f.add({});
    const parentId = tree.job.id!;
    const childId = tree.children![0]!.job.id!;
    await f.child.events.waitFor('job:dead-lettered', (e) => e.jobId === childId);
    // No failure option: the parent keeps waiting for its child.
    expect(f.parentRuns).toEqual([]);
    expect(await bullQueue(f.parentQ).getJobState(parentId)).toBe('waiting-children');
    fixed = true;
    expect(await f.child.dlq.replay({ id: childId })).toMatchObject({ done: 1, renamed: [] });
    await f.child.events.waitFor('job:completed', (e) => e.jobId === childId);
    const done = await f.parent.events.waitFor('job:completed', (e) => e.jobId === parentId);
    expect(done.result).toEqual({
      children: { [jobKey(admin, f.childQ, childId)]: 'child done' },
    });
    expect(await failedSetSize(f.childQ)).toBe(0);
  });
});

describe('deduplication (issue 25, item 5)', () => {
  it("a dead job's deduplication id is released: a new add with it is accepted", async () => {
    const [name] = names('dedup') as [string];
    const { events } = worker(name, async () => {
      throw new PermanentError('no');
    });
    const queue = bullQueue(name);
    const first = await queue.add('x', { n: 1 }, { deduplication: { id: 'order-7' } });
    await events.waitFor('job:dead-lettered', (e) => e.jobId === first.id);
    expect(await admin.exists(`${bullPrefixOf(admin, name)}:${name}:de:order-7`)).toBe(0);
    const second = await queue.add('x', { n: 2 }, { deduplication: { id: 'order-7' } });
    expect(second.id).not.toBe(first.id);
    await events.waitFor('job:dead-lettered', (e) => e.jobId === second.id);
    expect(await failedSetSize(name)).toBe(0);
  });

  it('while the job lives (retrying), the same deduplication id is still refused', async () => {
    const [name] = names('dedup') as [string];
    let runs = 0;
    const { events } = worker(name, async () => {
      runs += 1;
      throw unavailable();
    });
    const queue = bullQueue(name);
    const first = await queue.add('x', {}, { deduplication: { id: 'order-8' } });
    await events.waitFor('retry:scheduled', (e) => e.jobId === first.id);
    const again = await queue.add('x', {}, { deduplication: { id: 'order-8' } });
    expect(again.id).toBe(first.id);
    await events.waitFor('job:dead-lettered', (e) => e.jobId === first.id);
    expect(runs).toBe(3);
  });
});

describe("the dead-letter script runs BullMQ's own finalization code", () => {
  it("includes BullMQ's Lua functions once each, from the installed BullMQ", () => {
    const lua = scriptDefinitions()['deadLetter']!.lua;
    for (const fn of [
      'moveChildFromDependenciesIfNeeded',
      'removeDeduplicationKeyIfNeededOnFinalization',
      'requeueDeduplicatedJob',
      'moveParentToWait',
      'getOrSetMaxEvents',
    ])
      expect(lua.match(new RegExp(`local (function )?${fn}\\b`, 'g')), fn).toHaveLength(1);
    expect(lua).not.toMatch(/--- @include/);
  });
});
