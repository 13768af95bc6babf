import { afterAll, describe, expect, it } from 'vitest';
import { DeadLetterQueue, type DeadJobRecord } from '../../src/scheduler/dlq/dead-letter-queue.js';
import type { AttemptRecord } from '../../src/policy/job-state.js';
import { ManualClock } from '../../src/util/fake-clock.js';
import { cleanQueue, redisUrl, uniqueQueueName } from '../harness/redis.js';
import { onCleanup } from '../harness/cleanup.js';
import { gate } from '../harness/worker-events.js';
import { seedDead } from '../harness/dlq.js';
import { DAY_MS, admin, httpError, setup, deadRecord } from './scheduler-helpers.js';

/**
 * The dead-letter queue against Redis: replay, listing and purging, retention
 * by count and age on the DLQ's clock; and the queue's stats (retries and
 * payloads are in `scheduler.test.ts`).
 */

afterAll(() => {
  admin.disconnect();
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
