/**
 * Due retries before new work (issue 22, item 2): with `retryOrder: 'first'`
 * (the default) a due retry goes to the front of the wait list, for a
 * bounded share of the worker's jobs; with `'fifo'` it goes behind the
 * backlog, as BullMQ puts it. `src/scheduler/bullmq/retry-promoter.ts`,
 * `src/redis/lua/promoteRetries-7.lua`.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { Queue, Worker } from 'bullmq';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { requeueKeys } from '../../src/redis/keys.js';
import { bullKeys, delayedDueAt } from '../../src/scheduler/bullmq/bull-keys.js';
import { createQueue } from '../../src/scheduler/queue.js';
import { promoteRetries } from '../../src/scheduler/bullmq/retry-promoter.js';
import { createWorker, type RequeueWorker } from '../../src/scheduler/requeue-worker.js';
import type { RetryOrder } from '../../src/scheduler/worker-options.js';
import { onCleanup } from '../harness/cleanup.js';
import { bullPrefixOf, cleanQueue, connect, redisUrl, uniqueQueueName } from '../harness/redis.js';
import { gate } from '../harness/worker-events.js';

const logger = createLogger({ level: 'silent' });
const admin = connect();
afterAll(() => admin.disconnect());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Data = { kind: 'retry' | 'new' | 'forever' };

function setup(prefix: string) {
  const name = uniqueQueueName(prefix);
  const queue = createQueue<Data>(name, { connection: redisUrl() });
  onCleanup(async () => {
    await queue.close();
    await cleanQueue(admin, name);
  });
  const keys = bullKeys(name, bullPrefixOf(admin, name));
  return { name, queue, keys };
}

/** Every place BullMQ and requeue keep a job, with the ids in each. */
async function places(keys: ReturnType<typeof bullKeys>): Promise<Map<string, string[]>> {
  const [wait, active, delayed, prioritized, completed, failed] = await Promise.all([
    admin.lrange(keys.wait, 0, -1),
    admin.lrange(keys.active, 0, -1),
    admin.zrange(keys.delayed, 0, -1),
    admin.zrange(keys.prioritized, 0, -1),
    admin.zrange(keys.completed, 0, -1),
    admin.zrange(keys.failed, 0, -1),
  ]);
  const out = new Map<string, string[]>();
  const put = (where: string, ids: string[]) => {
    for (const id of ids) out.set(id, [...(out.get(id) ?? []), where]);
  };
  put('wait', wait);
  put('active', active);
  put('delayed', delayed);
  put('prioritized', prioritized);
  put('completed', completed);
  put('failed', failed);
  return out;
}

/**
 * Five jobs fail once (a 150 ms retry); once all five have failed, 150 new
 * 10 ms jobs arrive, two at a time being about 0.75 s of work. Returns the
 * order the handler saw them start in (`r` a retry, `n` a new job).
 */
async function retriesBehindBacklog(order: RetryOrder) {
  const t = setup(`order-${order}`);
  const starts: string[] = [];
  let failed = 0;
  const allFailed = gate();
  const allDone = gate();
  let done = 0;
  const total = 5 + 150;
  const worker: RequeueWorker<Data> = createWorker<Data>(
    t.name,
    async (job) => {
      if (job.data.kind === 'retry' && job.attempt === 1) {
        failed += 1;
        if (failed === 5) allFailed.open();
        throw Object.assign(new Error('unavailable'), { status: 503 });
      }
      starts.push(job.data.kind === 'retry' ? 'r' : 'n');
      await sleep(10);
      done += 1;
      if (done === total) allDone.open();
    },
    {
      connection: redisUrl(),
      logger,
      concurrency: 2,
      retryOrder: order,
      policy: { strategy: 'fixed', baseMs: 150, capMs: 150, maxAttempts: 2 },
    },
  );
  onCleanup(() => worker.close({ timeoutMs: 5_000 }));
  const ids = (
    await t.queue.addBulk(
      Array.from({ length: 5 }, () => ({ name: 'r', data: { kind: 'retry' as const } })),
    )
  ).map((j) => j.id);
  await allFailed.promise;
  const added = await t.queue.addBulk(
    Array.from({ length: 150 }, () => ({ name: 'n', data: { kind: 'new' as const } })),
  );
  ids.push(...added.map((j) => j.id));
  await allDone.promise;
  return { starts, ids, keys: t.keys };
}

describe('retry order', () => {
  it('due retries start before a backlog of new work (retryOrder first, the default)', async () => {
    const { starts, ids, keys } = await retriesBehindBacklog('first');
    const lastRetry = starts.lastIndexOf('r');
    // The backlog is ~0.75 s of work and the retries are due 150 ms in: with
    // the retries behind it they would be the last five.
    expect(starts.length - 1 - lastRetry).toBeGreaterThan(50);
    // Promise 1 after the run: every job in exactly one place, completed.
    await vi.waitFor(async () => {
      const where = await places(keys);
      for (const id of ids) expect(where.get(id)).toEqual(['completed']);
      expect(where.size).toBe(ids.length);
    });
  });

  it('with retryOrder fifo the due retries start after the backlog, as BullMQ orders them', async () => {
    const { starts } = await retriesBehindBacklog('fifo');
    expect(starts.slice(-5)).toEqual(['r', 'r', 'r', 'r', 'r']);
  });

  it('new jobs still start while retries never stop (the share bound)', async () => {
    const t = setup('forever');
    const newDone = gate();
    let newCount = 0;
    let retryAttempts = 0;
    const worker = createWorker<Data>(
      t.name,
      async (job) => {
        await sleep(5);
        if (job.data.kind === 'forever') {
          retryAttempts += 1;
          throw Object.assign(new Error('down'), { status: 503 });
        }
        newCount += 1;
        if (newCount === 30) newDone.open();
      },
      {
        connection: redisUrl(),
        logger,
        concurrency: 2,
        retryShare: 0.5,
        policy: { strategy: 'fixed', baseMs: 1, capMs: 1, maxAttempts: 1_000 },
      },
    );
    onCleanup(() => worker.close({ timeoutMs: 5_000 }));
    await t.queue.addBulk(
      Array.from({ length: 40 }, () => ({ name: 'f', data: { kind: 'forever' as const } })),
    );
    await vi.waitFor(() => expect(retryAttempts).toBeGreaterThan(100), { timeout: 20_000 });
    await t.queue.addBulk(
      Array.from({ length: 30 }, () => ({ name: 'n', data: { kind: 'new' as const } })),
    );
    await newDone.promise;
    expect(newCount).toBe(30);
  });

  it("a paused queue's due retries are not started", async () => {
    const t = setup('paused');
    let second = 0;
    let failed = 0;
    const allFailed = gate();
    const worker = createWorker<Data>(
      t.name,
      async (job) => {
        if (job.attempt === 1) {
          failed += 1;
          if (failed === 3) allFailed.open();
          throw Object.assign(new Error('unavailable'), { status: 503 });
        }
        second += 1;
      },
      {
        connection: redisUrl(),
        logger,
        concurrency: 2,
        policy: { strategy: 'fixed', baseMs: 100, capMs: 100, maxAttempts: 2 },
      },
    );
    onCleanup(() => worker.close({ timeoutMs: 5_000 }));
    await t.queue.addBulk(
      Array.from({ length: 3 }, () => ({ name: 'r', data: { kind: 'retry' as const } })),
    );
    await allFailed.promise;
    await t.queue.bull.pause();
    // Due, promoted to the wait list (by this worker's script or BullMQ's own), not started.
    await vi.waitFor(
      async () => {
        expect(await admin.zcard(t.keys.delayed)).toBe(0);
        expect(await admin.llen(t.keys.wait)).toBe(3);
      },
      { timeout: 15_000, interval: 50 },
    );
    expect(second).toBe(0);
    await t.queue.bull.resume();
    await vi.waitFor(() => expect(second).toBe(3), { timeout: 10_000 });
  });
});

describe('promoteRetries-7.lua', () => {
  it("still mirrors BullMQ's promoteDelayedJobs (fails loudly when an upgrade changes it)", () => {
    const require = createRequire(import.meta.url);
    const root = dirname(require.resolve('bullmq/package.json'));
    const lua = readFileSync(
      `${root}/dist/esm/commands/includes/promoteDelayedJobs.lua`,
      'utf8',
    ).replace(/\s+/g, ' ');
    // The due bound, the back of the list, the event, the delay field, the marker rule.
    expect(lua).toContain('"ZRANGEBYSCORE", delayedKey, 0, (timestamp + 1) * 0x1000 - 1');
    expect(lua).toContain('rcall("LPUSH", targetKey, jobId)');
    expect(lua).toContain('tonumber(rcall("HGET", jobKey, "priority")) or 0');
    expect(lua).toContain('"event", "waiting", "jobId", jobId, "prev", "delayed"');
    expect(lua).toContain('rcall("HSET", jobKey, "delay", 0)');
    expect(lua).toContain('addBaseMarkerIfNeeded(markerKey, isPaused)');
  });

  /** One run at a time past the jobs' delays, `limit` to the front, no hold. */
  async function moveDue(keys: ReturnType<typeof bullKeys>, limit: number): Promise<number> {
    return (await promoteRetries(admin, keys, tailOf(keys), { now: Date.now() + 90_000, limit }))
      .moved;
  }

  const tails = new Map<ReturnType<typeof bullKeys>, string>();
  /** The queue's front-block tail marker (`requeueKeys(name).retryTail`). */
  function tailOf(keys: ReturnType<typeof bullKeys>): string {
    return tails.get(keys) ?? '';
  }
  function tailed(t: ReturnType<typeof setup>): ReturnType<typeof setup> {
    tails.set(t.keys, requeueKeys(t.name).retryTail);
    return t;
  }

  async function delayedJobs(name: string) {
    const connection = connect();
    const bull = new Queue(name, { connection, prefix: bullPrefixOf(admin, name) });
    onCleanup(() => connection.disconnect());
    onCleanup(() => bull.close());
    const a = await bull.add('a', {}, { delay: 60_000 });
    const b = await bull.add('b', {}, { delay: 60_000, priority: 3 });
    const c = await bull.add('c', {}, { delay: 120_000 });
    return { bull, a: a.id!, b: b.id!, c: c.id! };
  }

  it('moves a due priority-0 job to the front with the waiting event, delay 0 and the marker; leaves prioritized and not-due jobs', async () => {
    const t = tailed(setup('script'));
    const jobs = await delayedJobs(t.name);
    await t.queue.add('older', { kind: 'new' });
    await admin.del(t.keys.marker);
    const moved = await moveDue(t.keys, 10);
    expect(moved).toBe(1);
    // The front: the end BullMQ's fetch takes from.
    expect(await admin.lindex(t.keys.wait, -1)).toBe(jobs.a);
    expect(await admin.llen(t.keys.wait)).toBe(2);
    expect(await admin.zrange(t.keys.delayed, 0, -1)).toEqual(
      expect.arrayContaining([jobs.b, jobs.c]),
    );
    expect(await admin.hget(`${t.keys.prefix}${jobs.a}`, 'delay')).toBe('0');
    expect(await admin.zscore(t.keys.marker, '0')).toBe('0');
    const events = await admin.xrange(t.keys.events, '-', '+');
    const waiting = events.filter(
      ([, f]) => f.join(' ') === `event waiting jobId ${jobs.a} prev delayed`,
    );
    expect(waiting).toHaveLength(1);
    expect(await jobs.bull.getJobState(jobs.a)).toBe('waiting');
  });

  it('adds no marker on a paused queue, and moves none with no credit', async () => {
    const t = tailed(setup('script-paused'));
    const jobs = await delayedJobs(t.name);
    await jobs.bull.pause();
    expect(await moveDue(t.keys, 0)).toBe(0);
    expect(await moveDue(t.keys, 5)).toBe(1);
    expect(await admin.lindex(t.keys.wait, -1)).toBe(jobs.a);
    expect(await admin.exists(t.keys.marker)).toBe(0);
  });

  it('retries due in two batches are fetched in due order, the earlier batch first (each run used to go in front of the last: LIFO across batches)', async () => {
    const t = tailed(setup('script-batches'));
    const connection = connect();
    const prefix = bullPrefixOf(admin, t.name);
    const bull = new Queue(t.name, { connection, prefix });
    const fetcher = new Worker(t.name, undefined, { connection: connect(), prefix });
    onCleanup(() => connection.disconnect());
    onCleanup(() => bull.close());
    onCleanup(() => fetcher.close());
    for (let i = 0; i < 3; i++) await t.queue.add('new', { kind: 'new' }); // a backlog
    const now = Date.now();
    const ids = async (names: string[], delay: number) =>
      Promise.all(names.map(async (n) => (await bull.add(n, {}, { delay })).id!));
    const first = await ids(['a1', 'a2', 'a3'], 60_000);
    const second = await ids(['b1', 'b2'], 62_000);
    const third = await ids(['c1'], 64_000);
    const run = (at: number) =>
      promoteRetries(admin, t.keys, tailOf(t.keys), { now: at, limit: 10 });
    expect((await run(now + 61_000)).moved).toBe(3);
    // One of the first batch fetched before the second batch falls due.
    const fetch = async (n: number) => {
      const got: string[] = [];
      for (let i = 0; i < n; i++) got.push((await fetcher.getNextJob(`token-${i}`))!.id!);
      return got;
    };
    expect(await fetch(1)).toEqual(first.slice(0, 1));
    expect((await run(now + 63_000)).moved).toBe(2);
    const fromFront = (await admin.lrange(t.keys.wait, 0, -1)).reverse();
    expect(fromFront.slice(0, 4)).toEqual([...first.slice(1), ...second]);
    expect(fromFront).toHaveLength(7);
    expect(await fetch(4)).toEqual([...first.slice(1), ...second]);
    // Once the block is fetched, the next run's go straight to the front, ahead of the backlog.
    expect((await run(now + 65_000)).moved).toBe(1);
    expect(await admin.lindex(t.keys.wait, -1)).toBe(third[0]);
    expect(await admin.llen(t.keys.wait)).toBe(4);
  });

  it('holds the due retries beyond the credit each about when the credit would cover them, in due order', async () => {
    const t = tailed(setup('script-hold'));
    const connection = connect();
    const bull = new Queue(t.name, { connection, prefix: bullPrefixOf(admin, t.name) });
    onCleanup(() => connection.disconnect());
    onCleanup(() => bull.close());
    for (let i = 0; i < 3; i++) await t.queue.add('new', { kind: 'new' }); // more than holdAboveJobs
    const due = [];
    for (const n of ['a', 'b', 'c', 'd']) due.push((await bull.add(n, {}, { delay: 60_000 })).id!);
    const at = Date.now() + 61_000;
    const run = await promoteRetries(admin, t.keys, tailOf(t.keys), {
      now: at,
      limit: 1,
      holdAboveJobs: 2,
      holdMs: 25,
      holdStepMs: 40,
    });
    expect(run).toMatchObject({ moved: 1, held: 3 });
    const scores = await admin.zrange(t.keys.delayed, 0, -1, 'WITHSCORES');
    expect(scores.filter((_, i) => i % 2 === 0)).toEqual(due.slice(1));
    const dueAt = scores.filter((_, i) => i % 2 === 1).map((s) => delayedDueAt(Number(s)));
    expect(dueAt).toEqual([at + 25, at + 65, at + 105].map(Math.floor));
  });
});
