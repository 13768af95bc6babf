import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createLogger } from '../../src/config/logger.js';
import type { RetryPolicyInput } from '../../src/policy/retry-policy.js';
import { DeadLetterQueue, type DeadJobRecord } from '../../src/scheduler/dlq/dead-letter-queue.js';
import { parseJobState, type AttemptRecord } from '../../src/policy/job-state.js';
import { createQueue, type RequeueQueue } from '../../src/scheduler/queue.js';
import {
  createWorker,
  type Handler,
  type RequeueWorker,
  type WorkerOptions,
} from '../../src/scheduler/requeue-worker.js';
import { ManualClock } from '../../src/util/fake-clock.js';
import { cleanQueue, connect, jobKey, redisUrl, uniqueQueueName } from '../harness/redis.js';
import { onCleanup } from '../harness/cleanup.js';
import { WorkerEventLog, gate } from '../harness/worker-events.js';
import { seedDead } from '../harness/dlq.js';

/**
 * Clock skew allowed between the worker's clock (which stamps the history)
 * and the time BullMQ promotes a delayed job: both read this machine's clock,
 * but BullMQ rounds the delay to whole milliseconds.
 */
const SKEW_MS = 5;
/** How late an attempt may start after its due time on a loaded test machine. */
const SCHEDULING_SLACK_MS = 2_000;
const DAY_MS = 24 * 3600 * 1000;

const logger = createLogger({ level: 'silent' });
const admin = connect();

afterAll(() => {
  admin.disconnect();
});

/** An error as an HTTP client throws it. */
function httpError(status: number, headers?: Record<string, string>): Error {
  return Object.assign(new Error(`HTTP ${status}`), { status, ...(headers ? { headers } : {}) });
}

/** A queue of its own for one test, removed with everything in it afterwards. */
function setup(prefix: string) {
  const name = uniqueQueueName(prefix);
  const queue: RequeueQueue<unknown> = createQueue(name, { connection: redisUrl() });
  const dlq = new DeadLetterQueue(name, { connection: redisUrl() });
  onCleanup(async () => {
    await dlq.close();
    await queue.close();
    await cleanQueue(admin, name);
  });

  function startWorker<T = unknown>(
    handler: Handler<T, unknown>,
    options: WorkerOptions<T> = {},
  ): { worker: RequeueWorker<T, unknown>; events: WorkerEventLog } {
    const worker = createWorker<T, unknown>(name, handler, {
      connection: redisUrl(),
      logger,
      ...options,
    });
    const events = new WorkerEventLog(worker);
    onCleanup(() => worker.close({ timeoutMs: 5_000 }));
    return { worker, events };
  }

  /** The attempt history stored in the job hash's `rq` field. */
  async function storedHistory(id: string): Promise<AttemptRecord[]> {
    const state = parseJobState(await admin.hget(jobKey(admin, name, id), 'rq'));
    if (!state) throw new Error(`job ${id} of ${name} has no stored state`);
    return state.history;
  }

  /** When BullMQ last moved the job to active: the start of its last attempt. */
  async function lastStartedAt(id: string): Promise<number> {
    const job = await queue.bull.getJob(id);
    if (!job?.processedOn) throw new Error(`job ${id} of ${name} has not been processed`);
    return job.processedOn;
  }

  return { name, queue, dlq, startWorker, storedHistory, lastStartedAt };
}

/** A dead record as the worker would store it, for the DLQ's own operations. */
function deadRecord(
  source: string,
  id: string,
  extra: Partial<DeadJobRecord> = {},
): Omit<DeadJobRecord, 'gen'> {
  const deadAt = extra.deadAt ?? Date.now();
  return {
    source,
    id,
    name: 'job',
    data: { id },
    opts: {},
    reason: 'permanent-error',
    message: 'HTTP 400',
    attempts: 1,
    history: [
      {
        attempt: 1,
        replay: 0,
        startedAt: deadAt - 5,
        finishedAt: deadAt,
        outcome: 'failed',
        decision: 'dead-letter',
        deadReason: 'permanent-error',
      },
    ],
    deadAt,
    replays: 0,
    ...extra,
  };
}

describe('retries', () => {
  it('retries a transient failure on a fixed schedule and completes', async () => {
    const t = setup('fixed');
    const policy: RetryPolicyInput = {
      strategy: 'fixed',
      baseMs: 300,
      capMs: 300,
      maxAttempts: 5,
    };
    let calls = 0;
    const { events } = t.startWorker(
      async () => {
        calls += 1;
        // Thrown as a bare object, as some clients do: the status alone must classify it.
        if (calls <= 2) throw { status: 503 };
        return 'ok';
      },
      { policy },
    );
    const { id } = await t.queue.add('fetch', { url: 'https://example.test' });
    const done = await events.waitFor('job:completed', (e) => e.jobId === id);

    expect(done.attempt).toBe(3);
    expect(calls).toBe(3);
    expect(events.all('retry:scheduled').map((e) => e.attempt)).toEqual([1, 2]);
    const stored = await t.storedHistory(id);
    // Two failures, then the success that completed the job.
    expect(stored).toHaveLength(3);
    expect(stored[2]).toMatchObject({ attempt: 3, outcome: 'succeeded', decision: 'completed' });
    const history = stored.slice(0, 2);
    for (const [i, record] of history.entries()) {
      expect(record).toMatchObject({
        attempt: i + 1,
        outcome: 'failed',
        decision: 'retry',
        classification: 'http-status',
        delayMs: 300,
        delaySource: 'strategy',
        error: { status: 503 },
      });
      expect(record.retryAt).toBe(record.finishedAt! + 300);
    }
    const starts = [history[0]!.startedAt, history[1]!.startedAt, await t.lastStartedAt(id)];
    for (let i = 0; i < 2; i += 1) {
      const failedAt = history[i]!.finishedAt!;
      expect(starts[i + 1]! - failedAt).toBeGreaterThanOrEqual(300 - SKEW_MS);
      expect(starts[i + 1]! - starts[i]!).toBeLessThan(300 + SCHEDULING_SLACK_MS);
    }
  });

  it('keeps full-jitter delays within [0, min(cap, base·2^n)] and waits them out', async () => {
    const t = setup('jitter');
    const policy: RetryPolicyInput = {
      strategy: 'full-jitter',
      baseMs: 100,
      capMs: 300,
      factor: 2,
      maxAttempts: 4,
    };
    const { events } = t.startWorker(
      async (job) => {
        if (job.attempt <= 3) throw httpError(503);
        return job.attempt;
      },
      { policy, concurrency: 4 },
    );
    const added = await t.queue.addBulk([1, 2, 3, 4].map((n) => ({ name: 'jitter', data: { n } })));
    const ids = added.map((job) => job.id);
    await events.waitForCount('job:completed', 4, (e) => ids.includes(e.jobId));

    for (const id of ids) {
      const stored = await t.storedHistory(id);
      expect(stored.map((r) => r.decision)).toEqual(['retry', 'retry', 'retry', 'completed']);
      const history = stored.slice(0, 3);
      const nextStarts = [history[1]!.startedAt, history[2]!.startedAt, await t.lastStartedAt(id)];
      for (const [n, record] of history.entries()) {
        const ceiling = Math.min(300, 100 * 2 ** n);
        expect(record.delaySource).toBe('strategy');
        expect(record.delayMs).toBeGreaterThanOrEqual(0);
        expect(record.delayMs).toBeLessThanOrEqual(ceiling);
        expect(nextStarts[n]).toBeGreaterThanOrEqual(
          record.finishedAt! + record.delayMs! - SKEW_MS,
        );
      }
    }
  });

  it('dead-letters a permanent error after exactly one attempt', async () => {
    const t = setup('permanent');
    let calls = 0;
    const { events } = t.startWorker(
      async () => {
        calls += 1;
        throw httpError(400);
      },
      { policy: { strategy: 'fixed', baseMs: 10, capMs: 10, maxAttempts: 5 } },
    );
    const { id } = await t.queue.add('send', { to: 'a@example.test' });
    await events.waitFor('job:dead-lettered', (e) => e.jobId === id);

    expect(calls).toBe(1);
    expect(events.all('retry:scheduled')).toEqual([]);
    const record = await t.dlq.get(id);
    expect(record).toMatchObject({
      id,
      name: 'send',
      data: { to: 'a@example.test' },
      reason: 'permanent-error',
      attempts: 1,
    });
    expect(record!.history).toHaveLength(1);
    expect(record!.history[0]).toMatchObject({
      outcome: 'failed',
      decision: 'dead-letter',
      deadReason: 'permanent-error',
      error: { status: 400 },
    });
    expect(await t.queue.bull.getJobState(id)).toBe('unknown');
  });

  it('dead-letters with max-attempts once the attempts are used up', async () => {
    const t = setup('exhaust');
    let calls = 0;
    const { events } = t.startWorker(
      async () => {
        calls += 1;
        throw httpError(503);
      },
      { policy: { strategy: 'fixed', baseMs: 20, capMs: 20, maxAttempts: 3 } },
    );
    const { id } = await t.queue.add('poll', {});
    const { record } = await events.waitFor('job:dead-lettered', (e) => e.jobId === id);

    expect(calls).toBe(3);
    expect(record.reason).toBe('max-attempts');
    expect(record.attempts).toBe(3);
    expect(record.history.map((r) => [r.attempt, r.outcome, r.decision])).toEqual([
      [1, 'failed', 'retry'],
      [2, 'failed', 'retry'],
      [3, 'failed', 'dead-letter'],
    ]);
    expect(record.history[2]!.deadReason).toBe('max-attempts');
    expect(await t.dlq.get(id)).toEqual(record);
  });

  it('stops retrying once maxElapsedMs would be overrun', async () => {
    const t = setup('elapsed');
    const windowMs = 700;
    const { events } = t.startWorker(
      async () => {
        throw httpError(503);
      },
      {
        policy: {
          strategy: 'fixed',
          baseMs: 200,
          capMs: 200,
          maxAttempts: 100,
          maxElapsedMs: windowMs,
        },
      },
    );
    const { id } = await t.queue.add('poll', {});
    const { record } = await events.waitFor('job:dead-lettered', (e) => e.jobId === id);

    expect(record.reason).toBe('max-elapsed');
    const { history } = record;
    const firstFailedAt = record.firstFailedAt!;
    expect(record.deadAt - firstFailedAt).toBeLessThanOrEqual(windowMs + SCHEDULING_SLACK_MS);
    // Attempts start at least 200 ms apart, so a 700 ms window holds at most 4.
    expect(record.attempts).toBe(history.length);
    expect(history.length).toBeGreaterThanOrEqual(2);
    expect(history.length).toBeLessThanOrEqual(4);
    // Every retry was due inside the window; the refused one would have been due after it.
    const last = history.at(-1)!;
    for (const retry of history.slice(0, -1)) {
      expect(retry.decision).toBe('retry');
      expect(retry.retryAt!).toBeLessThanOrEqual(firstFailedAt + windowMs);
    }
    expect(last).toMatchObject({ decision: 'dead-letter', deadReason: 'max-elapsed' });
    expect(last.finishedAt! + 200).toBeGreaterThan(firstFailedAt + windowMs);
  });

  it('counts maxElapsedMs from the first failure, not from the start of the first attempt', async () => {
    const t = setup('elapsed-slow');
    let calls = 0;
    const { events } = t.startWorker(
      async () => {
        calls += 1;
        // A slow first attempt (a request that times out): the window opens when it fails.
        if (calls === 1) await new Promise((resolve) => setTimeout(resolve, 400));
        throw httpError(503);
      },
      {
        policy: {
          strategy: 'fixed',
          baseMs: 200,
          capMs: 200,
          maxAttempts: 100,
          maxElapsedMs: 300,
        },
      },
    );
    const { id } = await t.queue.add('poll', {});
    const { record } = await events.waitFor('job:dead-lettered', (e) => e.jobId === id);

    const [first] = record.history;
    expect(record.firstFailedAt).toBe(first!.finishedAt);
    // Failed at F: the retry due at F + 200 is inside F + 300, the next one is not.
    expect(first).toMatchObject({ decision: 'retry', delayMs: 200 });
    expect(record).toMatchObject({ reason: 'max-elapsed', attempts: 2 });
    expect(calls).toBe(2);
  });

  it('honours Retry-After over the strategy', async () => {
    const t = setup('retry-after');
    let calls = 0;
    const { events } = t.startWorker(
      async () => {
        calls += 1;
        if (calls === 1) throw httpError(429, { 'retry-after': '1' });
        return 'ok';
      },
      { policy: { strategy: 'fixed', baseMs: 50, capMs: 50, maxAttempts: 3 } },
    );
    const { id } = await t.queue.add('call', {});
    await events.waitFor('job:completed', (e) => e.jobId === id);

    const [first] = await t.storedHistory(id);
    expect(first).toMatchObject({ delayMs: 1000, delaySource: 'server', error: { status: 429 } });
    expect(await t.lastStartedAt(id)).toBeGreaterThanOrEqual(first!.finishedAt! + 1000 - SKEW_MS);
  });
});

describe('jobs and payloads', () => {
  it('deduplicates adds with the same idempotency key', async () => {
    const t = setup('idem');
    const seen: { id: string; key: string | undefined }[] = [];
    const { events } = t.startWorker(async (job) => {
      seen.push({ id: job.id, key: job.idempotencyKey });
      return 'sent';
    });
    const key = 'webhook:msg_42';
    const [a, b] = await Promise.all([
      t.queue.add('deliver', { n: 1 }, { idempotencyKey: key }),
      t.queue.add('deliver', { n: 2 }, { idempotencyKey: key }),
    ]);
    expect(b!.id).toBe(a!.id);
    await events.waitFor('job:completed', (e) => e.jobId === a!.id);
    // A known job (completed, still kept) swallows a later add too.
    expect((await t.queue.add('deliver', { n: 3 }, { idempotencyKey: key })).id).toBe(a!.id);
    const { id: sentinel } = await t.queue.add('deliver', { n: 4 });
    await events.waitFor('job:completed', (e) => e.jobId === sentinel);

    expect(seen).toEqual([
      { id: a!.id, key },
      { id: sentinel, key: undefined },
    ]);
    expect(await t.queue.counts()).toMatchObject({ completed: 2, waiting: 0, delayed: 0 });
  });

  it('records the death of a job re-added under a key whose first job is dead', async () => {
    const t = setup('idem-dead');
    const { events } = t.startWorker(async () => {
      throw httpError(400);
    });
    const key = 'webhook:msg_7';
    const first = await t.queue.add('deliver', { n: 1 }, { idempotencyKey: key });
    await events.waitForCount('job:dead-lettered', 1);
    // The first job has left the source queue, so the key adds a new job.
    const second = await t.queue.add('deliver', { n: 2 }, { idempotencyKey: key });
    expect(second.id).toBe(first.id);
    await events.waitForCount('job:dead-lettered', 2);

    expect(events.all('job:dead-lettered').map((e) => e.record.data)).toEqual([{ n: 1 }, { n: 2 }]);
    // The second death must not vanish behind the first one's record.
    const stored = (await t.dlq.list()).map((r) => r.data);
    expect(stored).toContainEqual({ n: 2 });
  });

  it('dead-letters an invalid payload without calling the handler and carries on', async () => {
    const t = setup('payload');
    const handled: unknown[] = [];
    const { events } = t.startWorker(
      async (job) => {
        handled.push(job.data);
        return job.data.n * 2;
      },
      { schema: z.object({ n: z.number() }) },
    );
    const { id: bad } = await t.queue.add('double', { n: 'x' });
    const { id: good } = await t.queue.add('double', { n: 21 });
    await events.waitFor('job:completed', (e) => e.jobId === good);

    const record = await t.dlq.get(bad);
    expect(record).toMatchObject({ reason: 'invalid-payload', data: { n: 'x' } });
    expect(record!.message).toMatch(/\bdata\.n\b/);
    expect(handled).toEqual([{ n: 21 }]);
    expect((await t.queue.bull.getJob(good))?.returnvalue).toBe(42);
  });
});

describe('the dead-letter queue', () => {
  it('replays a dead job, which completes with its first life in its history', async () => {
    const t = setup('replay');
    let healthy = false;
    const histories: AttemptRecord[][] = [];
    const keys: (string | undefined)[] = [];
    const { events } = t.startWorker(
      async (job) => {
        histories.push([...job.history]);
        keys.push(job.idempotencyKey);
        if (!healthy) throw httpError(400);
        // The second life fails once more, so that its history is stored with the job.
        if (job.attempt === 1) throw httpError(503);
        return 'ok';
      },
      { policy: { strategy: 'fixed', baseMs: 20, capMs: 20, maxAttempts: 3 } },
    );
    const { id } = await t.queue.add('sync', { account: 7 });
    await events.waitFor('job:dead-lettered', (e) => e.jobId === id);
    expect(await t.dlq.count()).toBe(1);

    healthy = true;
    expect(await t.dlq.replay({ id })).toEqual({ done: 1, total: 1, renamed: [] });
    const done = await events.waitFor('job:completed');

    expect(await t.dlq.count()).toBe(0);
    expect(done.attempt).toBe(2);
    const history = await t.storedHistory(done.jobId);
    expect(history.map((r) => [r.replay, r.attempt, r.decision])).toEqual([
      [0, 1, 'dead-letter'],
      [1, 1, 'retry'],
      [1, 2, 'completed'],
    ]);
    expect(history[0]).toMatchObject({ deadReason: 'permanent-error', error: { status: 400 } });
    // The handler saw the first life on each attempt of the second.
    expect(histories.map((h) => h.length)).toEqual([0, 1, 2]);
    expect(keys).toEqual([undefined, undefined, undefined]);
    expect((await t.queue.bull.getJob(done.jobId))?.data).toEqual({ account: 7 });
  });

  it('replays a keyed dead job under its own id, key kept', async () => {
    const t = setup('replay-key');
    let healthy = false;
    const keys: (string | undefined)[] = [];
    const { events } = t.startWorker(async (job) => {
      keys.push(job.idempotencyKey);
      if (!healthy) throw httpError(400);
      return 'ok';
    });
    const key = 'order:7';
    const { id } = await t.queue.add('sync', { order: 7 }, { idempotencyKey: key });
    await events.waitFor('job:dead-lettered', (e) => e.jobId === id);
    expect(await t.dlq.get(id)).toMatchObject({ idempotencyKey: key, reason: 'permanent-error' });

    healthy = true;
    expect(await t.dlq.replay({ reason: 'permanent-error' })).toEqual({
      done: 1,
      total: 1,
      renamed: [],
    });
    await events.waitFor('job:completed', (e) => e.jobId === id);
    expect(keys).toEqual([key, key]);
    expect(await t.dlq.count()).toBe(0);
    // The replayed job is known again: the key deduplicates.
    expect((await t.queue.add('sync', { order: 8 }, { idempotencyKey: key })).id).toBe(id);
  });

  it('lists by reason and name, pages, counts and purges by reason', async () => {
    const t = setup('dlq-list');
    const { events } = t.startWorker(async (job) => {
      throw httpError((job.data as { status: number }).status);
    });
    const specs = [
      { name: 'email', status: 400 },
      { name: 'sms', status: 410 },
      { name: 'email', status: 410 },
      { name: 'sms', status: 400 },
      { name: 'email', status: 400 },
      { name: 'sms', status: 410 },
    ];
    const added = await t.queue.addBulk(specs.map((s) => ({ name: s.name, data: s })));
    const ids = added.map((job) => job.id);
    await events.waitForCount('job:dead-lettered', specs.length, (e) => ids.includes(e.jobId));
    // Newest first: with one worker the jobs died in the order they were added.
    const newestFirst = [...ids].reverse();
    const idsOf = (records: DeadJobRecord[]) => records.map((r) => r.id);

    const all = await t.dlq.list();
    expect(idsOf(all)).toEqual(newestFirst);
    expect(await t.dlq.count()).toBe(6);

    const gone = await t.dlq.list({ reason: 'gone' });
    expect(gone.map((r) => r.data)).toEqual(specs.filter((s) => s.status === 410).reverse());
    const sms = await t.dlq.list({ name: 'sms' });
    expect(sms.map((r) => r.data)).toEqual(specs.filter((s) => s.name === 'sms').reverse());
    expect(await t.dlq.count({ name: 'email', reason: 'permanent-error' })).toBe(2);

    expect(idsOf(await t.dlq.list({}, { offset: 2, limit: 2 }))).toEqual(newestFirst.slice(2, 4));
    expect(idsOf(await t.dlq.list({}, { offset: 5, limit: 10 }))).toEqual(newestFirst.slice(5));
    expect(idsOf(await t.dlq.list({ reason: 'gone' }, { offset: 1, limit: 1 }))).toEqual([
      gone[1]!.id,
    ]);
    expect(await t.dlq.list({ name: 'fax' })).toEqual([]);

    expect(await t.dlq.purge({ reason: 'gone' })).toEqual({ done: 3, total: 3 });
    expect(await t.dlq.count()).toBe(3);
    expect(await t.dlq.count({ reason: 'gone' })).toBe(0);
    expect(idsOf(await t.dlq.list())).toEqual(
      newestFirst.filter((id) => !idsOf(gone).includes(id)),
    );
  });

  it('keeps at most maxCount dead jobs, dropping the oldest', async () => {
    const name = uniqueQueueName('dlq-count');
    // A clock that stands still: put() applies the retention only on its first call.
    const dlq = new DeadLetterQueue(name, {
      connection: redisUrl(),
      retention: { maxCount: 3 },
      clock: new ManualClock(Date.now()),
    });
    onCleanup(async () => {
      await dlq.close();
      await cleanQueue(admin, name);
    });
    for (const [i, id] of ['d1', 'd2', 'd3', 'd4', 'd5'].entries())
      await seedDead(admin, deadRecord(name, id, { deadAt: Date.now() + i }));
    expect(await dlq.count()).toBe(5);

    expect(await dlq.applyRetention()).toBe(2);
    expect(await dlq.count()).toBe(3);
    expect((await dlq.list()).map((r) => r.id)).toEqual(['d5', 'd4', 'd3']);
  });

  it('drops dead jobs older than maxAgeMs', async () => {
    const name = uniqueQueueName('dlq-age');
    const writer = new DeadLetterQueue(name, { connection: redisUrl() });
    onCleanup(async () => {
      await writer.close();
      await cleanQueue(admin, name);
    });
    const oldAt = Date.now() - 10_000;
    const newAt = oldAt + 400;
    await seedDead(admin, deadRecord(name, 'old1', { deadAt: oldAt - 1 }));
    await seedDead(admin, deadRecord(name, 'old2', { deadAt: oldAt }));
    await seedDead(admin, deadRecord(name, 'new1', { deadAt: newAt }));
    await seedDead(admin, deadRecord(name, 'new2', { deadAt: newAt + 1 }));

    const boundary = (oldAt + newAt) / 2;
    const trimmer = new DeadLetterQueue(name, {
      connection: redisUrl(),
      retention: { maxAgeMs: Math.round(Date.now() - boundary) },
    });
    onCleanup(() => trimmer.close());
    expect(await trimmer.applyRetention()).toBe(2);
    expect((await writer.list()).map((r) => r.id)).toEqual(['new2', 'new1']);
  });

  it('ages dead jobs by their deadAt on the DLQ clock, not by when they were put', async () => {
    const name = uniqueQueueName('dlq-deadat');
    const clock = new ManualClock(Date.now());
    const dlq = new DeadLetterQueue(name, {
      connection: redisUrl(),
      retention: { maxAgeMs: DAY_MS },
      clock,
    });
    onCleanup(async () => {
      await dlq.close();
      await cleanQueue(admin, name);
    });
    await seedDead(admin, deadRecord(name, 'stale', { deadAt: clock.now() - 2 * DAY_MS }));
    await seedDead(admin, deadRecord(name, 'fresh', { deadAt: clock.now() }));

    await dlq.applyRetention();
    expect((await dlq.list()).map((r) => r.id)).toEqual(['fresh']);
    clock.advance(2 * DAY_MS);
    await dlq.applyRetention();
    expect(await dlq.count()).toBe(0);
  });
});

describe('stats', () => {
  it('counts waiting, active, delayed, completed, failed and dead jobs', async () => {
    const t = setup('stats');
    const started = gate();
    const release = gate();
    const { events } = t.startWorker(
      async (job) => {
        const { kind } = job.data as { kind: string };
        if (kind === 'permanent') throw httpError(400);
        if (kind === 'transient') throw httpError(503);
        if (kind === 'slow') {
          started.open();
          await release.promise;
        }
        return kind;
      },
      { policy: { strategy: 'fixed', baseMs: 60_000, capMs: 60_000, maxAttempts: 3 } },
    );
    await t.queue.add('later', { kind: 'ok' }, { delayMs: 60_000 });
    const ok = await t.queue.add('run', { kind: 'ok' });
    const dead = await t.queue.add('run', { kind: 'permanent' });
    const retried = await t.queue.add('run', { kind: 'transient' });
    const slow = await t.queue.add('run', { kind: 'slow' });
    await events.waitFor('job:completed', (e) => e.jobId === ok.id);
    await events.waitFor('job:dead-lettered', (e) => e.jobId === dead.id);
    await events.waitFor('retry:scheduled', (e) => e.jobId === retried.id);
    await started.promise;
    // The one worker slot is taken: these two wait.
    await t.queue.addBulk([
      { name: 'run', data: { kind: 'ok' } },
      { name: 'run', data: { kind: 'ok' } },
    ]);

    expect(await t.queue.counts()).toEqual({
      waiting: 2,
      active: 1,
      delayed: 2,
      completed: 1,
      failed: 0,
      dead: 1,
    });
    release.open();
    await events.waitFor('job:completed', (e) => e.jobId === slow.id);
  });
});
