import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { RetryPolicyInput } from '../../src/policy/retry-policy.js';
import { SKEW_MS, SCHEDULING_SLACK_MS, admin, httpError, setup } from './scheduler-helpers.js';

afterAll(() => {
  admin.disconnect();
});

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
