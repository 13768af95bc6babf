import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseBreakerOptions } from '../../src/policy/breaker/breaker-options.js';
import { parseBudgetOptions } from '../../src/policy/budget/budget-options.js';
import { BreakerStore, type BreakerStatus } from '../../src/redis/breaker-store.js';
import { BudgetStore } from '../../src/redis/budget-store.js';
import { EndpointStore } from '../../src/redis/endpoint-store.js';
import { seedDead } from '../harness/dlq.js';
import { DeadLetterQueue } from '../../src/scheduler/dlq/dead-letter-queue.js';
import { requeueKeys } from '../../src/redis/keys.js';
import { LimitStore } from '../../src/redis/limit-store.js';
import { parseAdaptiveConcurrency } from '../../src/policy/limit/limit-options.js';
import { createQueue } from '../../src/scheduler/queue.js';
import { runTs, type CommandResult } from '../harness/child.js';
import { cleanedQueueName, connect, redisUrl } from '../harness/redis.js';
import { onCleanup } from '../harness/cleanup.js';
import { sample } from '../harness/promtool.js';
import { RequeueMetrics } from '../../src/scheduler/metrics.js';
import {
  createWorker,
  queueBreakerKey,
  type RequeueWorker,
} from '../../src/scheduler/requeue-worker.js';
import { writesDuring as monitoredWrites } from '../harness/monitor.js';

/**
 * "Looking never writes" (issue 8): `requeue breaker status` ran the
 * breaker's and the ratio budget's *writing* scripts with the caller's bucket
 * size, so a status read with options other than the workers' deleted the
 * live windows. Status reads are now HGETALL + TIME summed in TypeScript with
 * the geometry stored in the window, and windows run on Redis's clock.
 */

/** Every CLI call is a Node process started under tsx: a second or two each. */
const CLI_TIMEOUT_MS = 60_000;

/** The workers' options, and a status caller's very different ones. */
// Windows run on Redis's clock: the workers' window outlives a CLI start on a loaded machine
// (a 10 s window once aged out while the CLI started).
const workerBreaker = { windowMs: 100_000, buckets: 10, minimumRequests: 10, failureRate: 0.5 };
const otherBreakers = [
  { windowMs: 100, buckets: 10 },
  { windowMs: 600_000, buckets: 2 },
];

let redis: Redis;
beforeAll(() => {
  redis = connect();
});
afterAll(() => {
  redis.disconnect();
});

function requeue(...args: string[]): Promise<CommandResult> {
  return runTs('src/cli/main.ts', [...args, '--redis', redisUrl()], {}, CLI_TIMEOUT_MS);
}

/** A key's bytes and its TTL, to compare before and after a read. */
async function snapshot(key: string): Promise<{ fields: Record<string, string>; pttl: number }> {
  const [fields, pttl] = await Promise.all([redis.hgetall(key), redis.pttl(key)]);
  return { fields, pttl };
}

/**
 * A TTL no writer ever sets: a write that refreshed it (every window writer
 * does) would show.
 */
const markerTtlMs = 86_400_000;

/** {@link monitoredWrites} on this file's connection. */
const writesDuring = (name: string, action: () => Promise<unknown>) =>
  monitoredWrites(redis, name, action);

describe('looking never writes', () => {
  it(
    'breaker status with other options does not delete the live window',
    { timeout: CLI_TIMEOUT_MS * 3 },
    async () => {
      const name = cleanedQueueName(redis, 'ro-breaker');
      const key = 'endpoint-1';
      const window = requeueKeys(name).breakerWindow(key);
      const worker = new BreakerStore(redis, name, parseBreakerOptions(workerBreaker));
      const now = Date.now();
      // 7 outcomes, 4 failed: below minimumRequests, the circuit stays closed.
      expect(
        await worker.record(key, { successes: 3, failures: 4, trailingFailures: 4 }, now),
      ).toBeUndefined();
      await redis.pexpire(window, markerTtlMs);
      const before = await snapshot(window);
      expect(Object.keys(before.fields)).toContain('g');

      const statuses: BreakerStatus[] = [];
      let cli: unknown;
      const writes = await writesDuring(name, async () => {
        for (const other of otherBreakers) {
          const reader = new BreakerStore(redis, name, parseBreakerOptions(other));
          statuses.push(await reader.status(key));
        }
        const run = await requeue(
          'breaker',
          'status',
          name,
          '--key',
          key,
          '--json',
          '--breaker',
          JSON.stringify(otherBreakers[0]),
        );
        expect(run.stderr).toBe('');
        cli = JSON.parse(run.stdout).breakers[0];
      });
      expect(writes).toEqual([]);
      const after = await snapshot(window);
      expect(after.fields).toEqual(before.fields);
      expect(after.pttl).toBeLessThanOrEqual(before.pttl);
      expect(after.pttl).toBeGreaterThan(markerTtlMs - 60_000);

      // Every reader sees the workers' window, summed with its stored geometry.
      expect(statuses).toHaveLength(otherBreakers.length);
      for (const s of statuses.map((status) => status.window))
        expect(s).toEqual({
          total: 7,
          failures: 4,
          consecutiveFailures: 4,
          failureRate: 4 / 7,
          geometry: { bucketMs: 10_000, buckets: 10 },
        });
      expect(cli).toMatchObject({ total: 7, failures: 4, windowMs: 100_000, buckets: 10 });

      // And the live breaker trips as it would have: 3 more failures make 7/10.
      const message = await worker.record(
        key,
        { successes: 0, failures: 3, trailingFailures: 3 },
        now,
      );
      expect(message?.transition).toBe('opened');
    },
  );

  it(
    'ratio budget status with other options does not delete the live window',
    { timeout: CLI_TIMEOUT_MS * 2 },
    async () => {
      const name = cleanedQueueName(redis, 'ro-ratio');
      const window = requeueKeys(name).budgetWindow;
      const worker = new BudgetStore(
        redis,
        name,
        parseBudgetOptions({ kind: 'ratio', ratio: 0.1, minRetries: 0, windowMs: 600_000 }),
      );
      await worker.settle(0, 100);
      for (let i = 0; i < 3; i += 1) expect(await worker.take(1)).toBe(true);
      await redis.pexpire(window, markerTtlMs);
      const before = await snapshot(window);

      const seen: unknown[] = [];
      const writes = await writesDuring(name, async () => {
        for (const windowMs of [100, 60_000]) {
          const reader = new BudgetStore(
            redis,
            name,
            parseBudgetOptions({ kind: 'ratio', windowMs }),
          );
          seen.push(await reader.status());
        }
        const run = await requeue(
          'breaker',
          'status',
          name,
          '--json',
          '--budget',
          JSON.stringify({ kind: 'ratio', windowMs: 100 }),
        );
        expect(run.stderr).toBe('');
        seen.push(JSON.parse(run.stdout).budget);
      });
      expect(writes).toEqual([]);
      const after = await snapshot(window);
      expect(after.fields).toEqual(before.fields);
      expect(after.pttl).toBeLessThanOrEqual(before.pttl);
      for (const status of seen)
        expect(status).toMatchObject({
          kind: 'ratio',
          requests: 100,
          retries: 3,
          windowMs: 600_000,
        });

      // The workers' budget carries on where it was: 7 more of 10, then no.
      const granted: boolean[] = [];
      for (let i = 0; i < 10; i += 1) granted.push(await worker.take(1));
      expect(granted.filter(Boolean)).toHaveLength(7);
    },
  );

  it(
    'breaker status (token bucket), endpoint list, stats and queues send no write command',
    { timeout: CLI_TIMEOUT_MS * 3 },
    async () => {
      const name = cleanedQueueName(redis, 'ro-cli');
      const queue = createQueue(name, { connection: redis });
      onCleanup(() => queue.close());
      await queue.add('job', { n: 1 });
      const budget = new BudgetStore(redis, name, parseBudgetOptions({}));
      await budget.take(5);
      const endpoints = new EndpointStore({ connection: redis });
      await endpoints.disable(name, 'hook-1', 'test');
      const unused = `never-used-${randomUUID().slice(0, 8)}`;

      const writes = await writesDuring(name, async () => {
        for (const args of [
          ['breaker', 'status', name, '--json', '--budget', '{"capacity":50}'],
          ['endpoint', 'list', name, '--json'],
          ['stats', name, '--json'],
          ['queues', '--json'],
          ['queues'],
        ]) {
          const run = await requeue(...args);
          expect(run.stderr, args.join(' ')).toBe('');
          expect(run.code, args.join(' ')).toBe(0);
        }
        expect(await budget.status()).toMatchObject({ tokens: 495, denied: 0 });
      });
      expect(writes).toEqual([]);

      // Looking at a queue that does not exist creates nothing either: it is
      // refused (exit code 2), where it once read as an empty queue.
      const stats = await requeue('stats', unused, '--json');
      expect(stats.code).toBe(2);
      expect(stats.stderr).toMatch(`no queue "${unused}"`);
      expect(await redis.keys(`*${unused}*`)).toEqual([]);
    },
  );
});

describe('looking at adaptive limits never writes', () => {
  it(
    'requeue limits --json reads the learned limits; expired leases are not counted, and not removed',
    { timeout: CLI_TIMEOUT_MS },
    async () => {
      const name = cleanedQueueName(redis, 'ro-limits');
      const store = new LimitStore(redis, name);
      const params = { ...parseAdaptiveConcurrency({}), leaseMs: 60_000 };
      const now = Date.now();
      await store.release('ep', 'gone', { signal: 'pause', latencyMs: 1, startedAt: now }, params);
      await store.acquire('ep', 'live', params);
      // A lease that expired a minute ago, as a dead worker leaves it.
      const leases = requeueKeys(name).limitLeases('ep');
      await redis.zadd(leases, now - 60_000, 'dead');
      let stdout = '';
      const writes = await writesDuring(name, async () => {
        const run = await requeue('limits', name, '--json');
        expect(run.stderr).toBe('');
        stdout = run.stdout;
      });
      expect(writes).toEqual([]);
      expect(JSON.parse(stdout)).toEqual({
        queue: name,
        keys: 1,
        limits: [
          {
            key: 'ep',
            limit: 1,
            admits: 1,
            threshold: 7,
            inFlight: 1,
            decreasedAt: expect.any(String),
          },
        ],
      });
      expect(await redis.zcard(leases)).toBe(2);
    },
  );
});

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
