import { describe, expect, it } from 'vitest';
import { parseBreakerOptions } from '../../src/policy/breaker/breaker-options.js';
import { BreakerStore } from '../../src/redis/breaker-store.js';
import { seedDead } from '../harness/dlq.js';
import { DeadLetterQueue } from '../../src/scheduler/dlq/dead-letter-queue.js';
import { createQueue } from '../../src/scheduler/queue.js';
import { cleanedQueueName } from '../harness/redis.js';
import { connectForFile, redis } from '../harness/file-redis.js';
import { onCleanup } from '../harness/cleanup.js';
import { sample } from '../harness/promtool.js';
import { RequeueMetrics } from '../../src/scheduler/metrics.js';
import {
  createWorker,
  queueBreakerKey,
  type RequeueWorker,
} from '../../src/scheduler/requeue-worker.js';
import { CLI_TIMEOUT_MS, workerBreaker, requeue, writesDuring } from './read-only-helpers.js';

/**
 * Looking never writes, continued: DLQ reads and a metrics scrape send reads
 * only, and workers with other window options or skewed clocks count in one
 * window (status reads are in `read-only-status.test.ts`).
 */

connectForFile();

describe('looking at the DLQ never writes', () => {
  it(
    'dlq list, count and show (CLI and library) send no write command',
    { timeout: CLI_TIMEOUT_MS * 4 },
    async () => {
      const name = cleanedQueueName(redis, 'ro-dlq');
      const now = Date.now();
      for (const id of ['d1', 'd2'])
        await seedDead(redis, {
          source: name,
          id,
          name: 'job',
          data: { id },
          opts: {},
          reason: 'permanent-error',
          message: 'x',
          attempts: 1,
          history: [],
          deadAt: now,
          replays: 0,
        });
      const dlq = new DeadLetterQueue(name, { connection: redis });
      onCleanup(() => dlq.close());
      const writes = await writesDuring(name, async () => {
        for (const args of [
          ['dlq', 'list', name, '--json'],
          ['dlq', 'count', name, '--reason', 'permanent-error'],
          ['dlq', 'show', name, 'd1', '--json'],
        ]) {
          const run = await requeue(...args);
          expect(run.stderr, args.join(' ')).toBe('');
          expect(run.code, args.join(' ')).toBe(0);
        }
        expect(await dlq.list({ reason: 'permanent-error' })).toHaveLength(2);
        expect(await dlq.count({ name: 'job' })).toBe(2);
        expect((await dlq.get('d2'))?.data).toEqual({ id: 'd2' });
      });
      expect(writes).toEqual([]);
    },
  );
});

describe('a metrics scrape never writes', () => {
  it('jobs per state, DLQ size, breaker states and budget tokens are read with reads only', async () => {
    const name = cleanedQueueName(redis, 'ro-metrics');
    const queue = createQueue(name, { connection: redis });
    onCleanup(() => queue.close());
    await queue.add('job', { n: 1 });
    await seedDead(redis, {
      source: name,
      id: 'd1',
      name: 'job',
      data: {},
      opts: {},
      reason: 'permanent-error',
      message: 'x',
      attempts: 1,
      history: [],
      deadAt: Date.now(),
      replays: 0,
    });
    // A worker that never runs: its breaker and budget stores are what a scrape reads.
    const worker = createWorker(name, async () => undefined, {
      connection: redis,
      autorun: false,
      breaker: {},
      budget: {},
      adaptiveConcurrency: {},
    });
    onCleanup(() => worker.close({ timeoutMs: 1_000 }));
    // Its start (breaker cache, clock check) done before anything is watched:
    // under load it once ran into the scrape's window.
    await worker.waitUntilReady();
    // One key with a learned limit (10 × 0.7) and two leases in flight.
    const limits = worker.limits!;
    await limits.store.acquire('endpoint-3', 'a', limits.params);
    await limits.store.acquire('endpoint-3', 'b', limits.params);
    await limits.store.acquire('endpoint-3', 'c', limits.params);
    const overload = { signal: 'overload' as const, latencyMs: 1, startedAt: Date.now() };
    await limits.store.release('endpoint-3', 'c', overload, limits.params);
    const breakers = worker.gate.breakers!;
    await breakers.forceOpen(queueBreakerKey, Date.now());
    await breakers.forceOpen('endpoint-1', Date.now());
    await breakers.record(
      'endpoint-2',
      { successes: 1, failures: 0, trailingFailures: 0 },
      Date.now(),
    );
    expect(await worker.gate.budget!.take(5)).toBe(true);
    const metrics = new RequeueMetrics();
    metrics.watch(worker as unknown as RequeueWorker<unknown, unknown>);
    metrics.watchQueue(queue);

    let text = '';
    const writes = await writesDuring(name, async () => {
      text = (await metrics.render()).body;
    });
    expect(writes).toEqual([]);
    const q = { queue: name };
    expect(sample(text, 'requeue_jobs', { ...q, state: 'waiting' })).toBe(1);
    expect(sample(text, 'requeue_jobs', { ...q, state: 'dead' })).toBe(1);
    expect(sample(text, 'requeue_dlq_jobs', q)).toBe(1);
    expect(sample(text, 'requeue_breaker_state', { ...q, state: 'open' })).toBe(1);
    expect(sample(text, 'requeue_breaker_state', { ...q, state: 'closed' })).toBe(0);
    expect(sample(text, 'requeue_breaker_keys', { ...q, state: 'open' })).toBe(1);
    expect(sample(text, 'requeue_breaker_keys', { ...q, state: 'closed' })).toBe(1);
    expect(sample(text, 'requeue_budget_tokens', q)).toBe(495);
    expect(sample(text, 'requeue_adaptive_keys', q)).toBe(1);
    expect(sample(text, 'requeue_adaptive_limited_keys', q)).toBe(1);
    expect(sample(text, 'requeue_adaptive_in_flight', q)).toBe(2);
    expect(sample(text, 'requeue_adaptive_limit_min', q)).toBe(7);
    expect(text).not.toContain('endpoint-3');
    expect(text).not.toContain('endpoint-1');
  });
});

describe('one window for the fleet', () => {
  it('a worker with other window options adds to the live window instead of deleting it', async () => {
    const name = cleanedQueueName(redis, 'ro-mixed');
    const key = 'k';
    const a = new BreakerStore(redis, name, parseBreakerOptions(workerBreaker));
    const foreign: unknown[] = [];
    const b = new BreakerStore(
      redis,
      name,
      parseBreakerOptions({ ...workerBreaker, windowMs: 100, buckets: 10 }),
      { onForeignGeometry: (k, stored, own) => foreign.push({ k, stored, own }) },
    );
    const now = Date.now();
    await a.record(key, { successes: 0, failures: 6, trailingFailures: 6 }, now);
    // Before, b's 10 ms buckets made every one of a's look old: b deleted them.
    const message = await b.record(key, { successes: 0, failures: 4, trailingFailures: 4 }, now);
    expect(message?.transition).toBe('opened');
    expect((await a.status(key)).window).toMatchObject({ total: 10, failures: 10 });
    expect(foreign).toEqual([
      { k: key, stored: { bucketMs: 10_000, buckets: 10 }, own: { bucketMs: 10, buckets: 10 } },
    ]);
  });

  it('workers whose clocks are an hour apart count in one window', async () => {
    const name = cleanedQueueName(redis, 'ro-skew');
    const key = 'k';
    const options = parseBreakerOptions(workerBreaker);
    const now = Date.now();
    const ahead = new BreakerStore(redis, name, options);
    const behind = new BreakerStore(redis, name, options);
    // Before, each wrote to the bucket of its own clock and pruned the other's.
    await ahead.record(key, { successes: 0, failures: 5, trailingFailures: 5 }, now + 3_600_000);
    const message = await behind.record(
      key,
      { successes: 0, failures: 5, trailingFailures: 5 },
      now,
    );
    expect(message?.transition).toBe('opened');
    // The breaker's own state keeps the worker's clock: it opened at the tripping worker's now.
    expect(message?.state).toMatchObject({ phase: 'open', openedAt: now });
    expect((await ahead.status(key)).window).toMatchObject({ total: 10, failures: 10 });
  });
});
