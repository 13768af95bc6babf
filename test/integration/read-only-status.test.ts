import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { parseBreakerOptions } from '../../src/policy/breaker/breaker-options.js';
import { parseBudgetOptions } from '../../src/policy/budget/budget-options.js';
import { BreakerStore, type BreakerStatus } from '../../src/redis/breaker-store.js';
import { BudgetStore } from '../../src/redis/budget-store.js';
import { EndpointStore } from '../../src/redis/endpoint-store.js';
import { requeueKeys } from '../../src/redis/keys.js';
import { LimitStore } from '../../src/redis/limit-store.js';
import { parseAdaptiveConcurrency } from '../../src/policy/limit/limit-options.js';
import { createQueue } from '../../src/scheduler/queue.js';
import { cleanedQueueName } from '../harness/redis.js';
import { connectForFile, redis } from '../harness/file-redis.js';
import { onCleanup } from '../harness/cleanup.js';
import {
  CLI_TIMEOUT_MS,
  workerBreaker,
  otherBreakers,
  requeue,
  snapshot,
  markerTtlMs,
  writesDuring,
} from './read-only-helpers.js';

/**
 * "Looking never writes" (issue 8): `requeue breaker status` ran the
 * breaker's and the ratio budget's *writing* scripts with the caller's bucket
 * size, so a status read with options other than the workers' deleted the
 * live windows. Status reads are now HGETALL + TIME summed in TypeScript with
 * the geometry stored in the window, and windows run on Redis's clock.
 */

connectForFile();

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
