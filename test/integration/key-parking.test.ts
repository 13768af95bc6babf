/**
 * Issue 22, item 1: a saturated key's jobs are parked until a slot of that key
 * frees, not fetched and put back again and again (src/scheduler/bullmq/key-parking.ts),
 * on a real Redis: no job lost or run twice, the key's limit held, the parked
 * state gone once the keys drain, and a worker SIGKILLed while its key is
 * saturated leaves no key parked for ever.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { requeueKeys } from '../../src/redis/keys.js';
import { bullKeys } from '../../src/scheduler/bullmq/bull-keys.js';
import { createQueue, type RequeueQueue } from '../../src/scheduler/queue.js';
import { createWorker, type RequeueWorker } from '../../src/scheduler/requeue-worker.js';
import { spawnTs } from '../harness/child.js';
import { onCleanup } from '../harness/cleanup.js';
import { bullPrefixOf, cleanQueue, connect, redisUrl, uniqueQueueName } from '../harness/redis.js';

const logger = createLogger({ level: 'silent' });
const admin = connect();
afterAll(() => admin.disconnect());

interface Data {
  key: string;
  n: number;
}

function setup() {
  const name = uniqueQueueName('park');
  const queue: RequeueQueue<Data> = createQueue<Data>(name, { connection: admin });
  onCleanup(async () => {
    await queue.close();
    await cleanQueue(admin, name);
    await admin.del(`${name}:started`);
  });
  const bull = bullKeys(name, bullPrefixOf(admin, name));
  return { name, queue, bull, keys: requeueKeys(name) };
}

async function addKeyed(queue: RequeueQueue<Data>, key: string, count: number): Promise<void> {
  for (let start = 0; start < count; start += 1_000)
    await queue.addBulk(
      Array.from({ length: Math.min(1_000, count - start) }, (_, i) => ({
        name: 'job',
        data: { key, n: start + i },
        opts: { dispatchKey: key },
      })),
    );
}

const tick = (ms = 20) => new Promise((resolve) => setTimeout(resolve, ms));

/** requeue's parked keys of queue `name`: the index and every key's list. */
async function parkedState(name: string): Promise<string[]> {
  const { parkedKeys, parkedPrefix } = requeueKeys(name);
  const lists = await admin.keys(`${parkedPrefix.replace(/[{}*?[\]]/g, '\\$&')}*`);
  return [...((await admin.exists(parkedKeys)) ? [parkedKeys] : []), ...lists];
}

/** A worker whose handler takes `ms`, counting each key's attempts running at once. */
function countingWorker(
  name: string,
  ms: number,
  keyConcurrency: number,
  stalledIntervalMs?: number,
) {
  const runs = new Map<string, number>();
  const running = new Map<string, number>();
  let peak = 0;
  const worker: RequeueWorker<Data> = createWorker<Data>(
    name,
    async (job) => {
      const id = String(job.id);
      runs.set(id, (runs.get(id) ?? 0) + 1);
      const now = (running.get(job.data.key) ?? 0) + 1;
      running.set(job.data.key, now);
      peak = Math.max(peak, now);
      await tick(ms);
      running.set(job.data.key, (running.get(job.data.key) ?? 1) - 1);
    },
    {
      connection: admin,
      concurrency: 8,
      keyConcurrency,
      breakerKey: (job) => job.data.key,
      logger,
      ...(stalledIntervalMs !== undefined && { stalledIntervalMs, lockDurationMs: 1_000 }),
    },
  );
  onCleanup(() => worker.close());
  return { worker, runs, peak: () => peak };
}

describe('parking a saturated key', () => {
  it('parks a saturated key at the head instead of fetching and putting it back (was: thousands of put-backs a second, taking the CPU other keys need)', async () => {
    const { name, queue, bull, keys } = setup();
    await addKeyed(queue, 'A', 2_000);
    const own = connect();
    onCleanup(() => own.disconnect());
    let deferrals = 0;
    let started = 0;
    const worker: RequeueWorker<Data> = createWorker<Data>(
      name,
      async () => {
        started += 1;
        await new Promise((resolve) => setTimeout(resolve, 5_000));
      },
      {
        // Its own connection: closed at its deadline with a job still running.
        connection: own,
        concurrency: 4,
        // One of A's jobs at a time: the other three slots can only find A's jobs.
        keyConcurrency: 1,
        breakerKey: (job) => job.data.key,
        logger,
      },
    );
    onCleanup(() => worker.close({ timeoutMs: 1_000 }));
    worker.on('job:deferred', () => (deferrals += 1));
    await worker.waitUntilReady();
    while ((await admin.zcard(bull.delayed)) < 1_999) await tick();
    // All of A's other jobs are parked (delayed, listed), none left to fetch.
    expect(await admin.zcard(bull.prioritized)).toBe(0);
    expect(await admin.llen(keys.parkedPrefix + 'A')).toBe(1_999);
    // The parks took a few fetches (a park takes the key's jobs near the head with it).
    expect(deferrals).toBeLessThan(100);
    const from = deferrals;
    await tick(500);
    expect(deferrals - from).toBe(0);
    expect(started).toBe(1);
    expect((await queue.counts()).delayed).toBe(1_999);
  });

  it('runs every job once, never more of a key at once than its limit, and leaves no parked state', async () => {
    const { name, queue, bull } = setup();
    await addKeyed(queue, 'A', 300);
    await addKeyed(queue, 'B', 30);
    await addKeyed(queue, 'C', 30);
    const { worker, runs, peak } = countingWorker(name, 10, 2);
    let completed = 0;
    worker.on('job:completed', () => (completed += 1));
    while (completed < 360) await tick(50);
    expect(runs.size).toBe(360);
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    expect(peak()).toBeLessThanOrEqual(2);
    while ((await parkedState(name)).length > 0) await tick();
    expect(await admin.exists(bull.delayed, bull.prioritized)).toBe(0);
  });

  it('1,000 keys × 3 jobs, one slot per key: every job runs once and no per-key parked key is left', async () => {
    const { name, queue } = setup();
    for (let start = 0; start < 1_000; start += 250)
      await queue.addBulk(
        Array.from({ length: 750 }, (_, i) => {
          const key = `tenant-${start + (i % 250)}`;
          return { name: 'job', data: { key, n: i }, opts: { dispatchKey: key } };
        }),
      );
    const { worker, runs, peak } = countingWorker(name, 1, 1);
    let completed = 0;
    worker.on('job:completed', () => (completed += 1));
    while (completed < 3_000) await tick(50);
    expect(runs.size).toBe(3_000);
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    expect(peak()).toBe(1);
    while ((await parkedState(name)).length > 0) await tick();
  }, 120_000);

  it('a worker SIGKILLed while its key is saturated leaves no key parked for ever: every job completes', async () => {
    const { name, queue, keys } = setup();
    await addKeyed(queue, 'A', 40);
    const child = spawnTs('test/fixtures/parking-worker.ts', [], {
      REDIS_URL: redisUrl(),
      QUEUE: name,
    });
    onCleanup(() => child.kill('SIGKILL').then(() => undefined));
    // Saturated: one of A's jobs hangs there, the other 39 are parked.
    // (The child's start takes seconds on a loaded machine.)
    while ((await admin.llen(keys.parkedPrefix + 'A')) < 39) await tick(100);
    expect(await admin.llen(`${name}:started`)).toBe(1);
    await child.kill('SIGKILL');
    const { worker, runs } = countingWorker(name, 5, 1, 500);
    let completed = 0;
    worker.on('job:completed', () => (completed += 1));
    // The hung job comes back by stalled recovery; its run frees A's slot, and
    // each run after it releases the next (or the stale check does).
    while (completed < 40) await tick(50);
    expect(runs.size).toBe(40);
    // Each ran once here (the killed worker's started once, there: at least once).
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    while ((await parkedState(name)).length > 0) await tick();
    expect(await queue.counts()).toMatchObject({
      waiting: 0,
      delayed: 0,
      active: 0,
      completed: 40,
    });
  }, 60_000);
});
