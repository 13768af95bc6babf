/**
 * Issue 22, item 1: fair dispatch across keys on a real Redis. A key's
 * backlog delays only itself, weights give proportional shares, a re-add
 * does not move a job, and per-key state goes when the keys drain.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { requeueKeys } from '../../src/redis/keys.js';
import { bullKeys } from '../../src/scheduler/bullmq/bull-keys.js';
import { createQueue, type AddOptions, type RequeueQueue } from '../../src/scheduler/queue.js';
import { createWorker, type RequeueWorker } from '../../src/scheduler/requeue-worker.js';
import { onCleanup } from '../harness/cleanup.js';
import { bullPrefixOf, cleanQueue, connect, uniqueQueueName } from '../harness/redis.js';

const logger = createLogger({ level: 'silent' });
const admin = connect();
afterAll(() => admin.disconnect());

interface Data {
  key: string;
}

function setup(options: { dispatchWeights?: Record<string, number> } = {}) {
  const name = uniqueQueueName('fair');
  const queue: RequeueQueue<Data> = createQueue<Data>(name, { connection: admin, ...options });
  onCleanup(async () => {
    await queue.close();
    await cleanQueue(admin, name);
  });
  const bull = bullKeys(name, bullPrefixOf(admin, name));
  return { name, queue, bull, fair: requeueKeys(name).fair };
}

/** Adds `count` jobs of `key`, in bulks of 1,000. */
async function addKeyed(
  queue: RequeueQueue<Data>,
  key: string,
  count: number,
  opts: AddOptions = {},
): Promise<void> {
  for (let start = 0; start < count; start += 1_000) {
    const n = Math.min(1_000, count - start);
    await queue.addBulk(
      Array.from({ length: n }, () => ({
        name: 'job',
        data: { key },
        opts: { dispatchKey: key, ...opts },
      })),
    );
  }
}

/** Runs one worker (concurrency 1) until `total` jobs started; returns the keys in start order. */
async function runInOrder(name: string, total: number): Promise<string[]> {
  const order: string[] = [];
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  const worker: RequeueWorker<Data> = createWorker<Data>(
    name,
    async (job) => {
      order.push(job.data.key);
      if (order.length === total) done();
    },
    { connection: admin, concurrency: 1, logger },
  );
  onCleanup(() => worker.close());
  await finished;
  return order;
}

describe('fair dispatch', () => {
  it('a backlog of key A does not delay keys B..K: their first jobs start before A drains', async () => {
    const { name, queue } = setup();
    await addKeyed(queue, 'A', 300);
    const small = 'BCDEFGHIJK'.split('');
    for (const key of small) await addKeyed(queue, key, 3);
    const order = await runInOrder(name, 330);
    // Start-time fair queuing: 11 keys with jobs at virtual times 0, 1, 2 go
    // round by round, so every small key's 3 jobs are among the first 33 starts.
    const lastSmall = Math.max(...order.map((key, i) => (key === 'A' ? -1 : i)));
    expect(lastSmall).toBeLessThan(33);
    for (const key of small) expect(order.indexOf(key)).toBeLessThan(11);
    expect(order.slice(33).every((key) => key === 'A')).toBe(true);
  });

  it('weights give proportional shares (3 : 1)', async () => {
    const { name, queue } = setup({ dispatchWeights: { heavy: 3 } });
    await addKeyed(queue, 'heavy', 200);
    await addKeyed(queue, 'light', 200);
    const order = await runInOrder(name, 400);
    const heavy = order.slice(0, 200).filter((key) => key === 'heavy').length;
    expect(heavy).toBeGreaterThanOrEqual(148);
    expect(heavy).toBeLessThanOrEqual(152);
  });

  it('a dispatchWeight on the add overrides the queue’s weight', async () => {
    const { name, queue } = setup({ dispatchWeights: { a: 1 } });
    await addKeyed(queue, 'a', 100, { dispatchWeight: 4 });
    await addKeyed(queue, 'b', 100);
    const order = await runInOrder(name, 200);
    const a = order.slice(0, 100).filter((key) => key === 'a').length;
    expect(a).toBeGreaterThanOrEqual(78);
    expect(a).toBeLessThanOrEqual(82);
  });

  it('an idempotent re-add does not move a job, whatever its dispatch key', async () => {
    const { queue, bull } = setup();
    await addKeyed(queue, 'A', 20);
    const first = await queue.add('job', { key: 'A' }, { dispatchKey: 'A', idempotencyKey: 'x' });
    const score = await admin.zscore(bull.prioritized, first.id);
    expect(Number(score) - 2 ** 32).toBe(20);
    // A fresh key would start at the virtual time (0), at the front.
    const again = await queue.add('job', { key: 'Z' }, { dispatchKey: 'Z', idempotencyKey: 'x' });
    const unkeyed = await queue.add('job', { key: 'Z' }, { idempotencyKey: 'x' });
    expect([again.id, unkeyed.id]).toEqual([first.id, first.id]);
    expect(await admin.zscore(bull.prioritized, first.id)).toBe(score);
    expect(await admin.llen(bull.wait)).toBe(0);
    expect(await admin.zscore(requeueKeys(queue.name).fair, 'Z')).toBeNull();
  });

  it('keyed jobs count as waiting; unkeyed jobs take the wait list, unchanged', async () => {
    const { queue, bull } = setup();
    await addKeyed(queue, 'A', 3);
    await queue.add('job', { key: '-' });
    expect((await queue.counts()).waiting).toBe(4);
    expect(await admin.zcard(bull.prioritized)).toBe(3);
    expect(await admin.llen(bull.wait)).toBe(1);
  });

  it('keyed adds made together: one that BullMQ refuses fails alone (each is its own script call)', async () => {
    const { queue, bull } = setup();
    const results = await Promise.allSettled([
      queue.add('job', { key: 'a' }, { dispatchKey: 'a' }),
      queue.add('job', { key: 'b', n: 1n } as unknown as Data, { dispatchKey: 'b' }),
      queue.add('job', { key: 'c' }, { dispatchKey: 'c' }),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(await admin.zcard(bull.prioritized)).toBe(2);
    // addBulk is all or nothing.
    await expect(
      queue.addBulk([
        { name: 'job', data: { key: 'd' }, opts: { dispatchKey: 'd' } },
        { name: 'job', data: { key: 'e', n: 1n } as unknown as Data, opts: { dispatchKey: 'e' } },
      ]),
    ).rejects.toThrow();
    expect(await admin.zcard(bull.prioritized)).toBe(2);
  });

  it('bad dispatch input is refused with one line naming the field', async () => {
    const { queue } = setup();
    const refused = (opts: AddOptions) =>
      queue.add('job', { key: 'a' }, opts).then(
        () => 'accepted',
        (err: Error) => err.message,
      );
    expect(await refused({ dispatchKey: '' })).toBe('dispatchKey: must be 1–200 characters');
    expect(await refused({ dispatchKey: 'k'.repeat(201) })).toBe(
      'dispatchKey: must be 1–200 characters',
    );
    expect(await refused({ dispatchKey: 'a', dispatchWeight: 0 })).toBe(
      'dispatchWeight: must be a number from 0.001 to 1000 (> 0)',
    );
    expect(() => createQueue('x', { connection: admin, dispatchWeights: { a: 0 } })).toThrow(
      'queue.dispatchWeights.a: must be a number from 0.001 to 1000 (> 0)',
    );
    expect((await queue.counts()).waiting).toBe(0);
  });

  it(
    'distinct keys × 1 job (10,000; FAIR_DRAIN_KEYS=100000 passes too) leave no per-key state once they complete',
    { timeout: 180_000 },
    async () => {
      const { name, queue, bull, fair } = setup();
      const keys = Number(process.env.FAIR_DRAIN_KEYS ?? 10_000);
      for (let start = 0; start < keys; start += 1_000)
        await queue.addBulk(
          Array.from({ length: 1_000 }, (_, i) => ({
            name: 'job',
            data: { key: `tenant-${start + i}` },
            opts: { dispatchKey: `tenant-${start + i}` },
          })),
        );
      const perKeyBytes = Number(await admin.memory('USAGE', fair)) / (await admin.zcard(fair));
      expect(perKeyBytes).toBeLessThan(200);
      const order = await runInOrder(name, keys);
      expect(new Set(order).size).toBe(keys);
      // The worker trims on BullMQ's 'drained'; wait for it (no sleep).
      for (let i = 0; i < 100 && (await admin.exists(fair)) === 1; i++)
        await new Promise((resolve) => setTimeout(resolve, 50));
      expect(await admin.exists(fair, bull.pc, bull.prioritized)).toBe(0);
    },
  );
});

// A saturated key at the head of the queue: test/integration/key-parking.test.ts.

describe('add options', () => {
  it('an unknown add option is refused in one line naming it (was: `delay` for `delayMs` ignored, the job ran at once)', async () => {
    const { queue } = setup();
    const refusal = await queue.add('job', { key: 'a' }, { delay: 5_000 } as never).then(
      () => undefined,
      (err: Error) => err,
    );
    expect(refusal?.name).toBe('ConfigError');
    expect(refusal?.message).toMatch(/delay: not an add option \(idempotencyKey, policy, delayMs/);
    expect(refusal?.message).not.toContain('\n');
    expect(await queue.counts()).toMatchObject({ waiting: 0, delayed: 0 });
  });
});
