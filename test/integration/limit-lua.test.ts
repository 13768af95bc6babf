import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  initialLimitState,
  nextLimit,
  type LimitSignal,
  type LimitState,
} from '../../src/policy/limit/aimd.js';
import { parseAdaptiveConcurrency } from '../../src/policy/limit/limit-options.js';
import { requeueKeys } from '../../src/redis/keys.js';
import { LimitStore, type LimitParams } from '../../src/redis/limit-store.js';
import { cleanQueue, connect, uniqueQueueName } from '../harness/redis.js';
import { onCleanup } from '../harness/cleanup.js';

let redis: Redis;
beforeAll(() => {
  redis = connect();
});
afterAll(() => {
  redis.disconnect();
});

const params = fc
  .record({
    floor: fc.integer({ min: 1, max: 5 }),
    span: fc.integer({ min: 0, max: 30 }),
    at: fc.double({ min: 0, max: 1, noNaN: true }),
    latencyTargetMs: fc.integer({ min: 1, max: 1_000 }),
    additiveIncrease: fc.double({ min: 0.01, max: 5, noNaN: true }),
    backoffRatio: fc.double({ min: 0.05, max: 0.95, noNaN: true }),
    recoveryMs: fc.integer({ min: 1, max: 400 }),
  })
  .map(({ floor, span, at, ...rest }): LimitParams => ({
    ...parseAdaptiveConcurrency({}),
    ...rest,
    floor,
    ceiling: floor + span,
    initial: floor + Math.floor(at * span),
    leaseMs: 60_000,
  }));

type Op =
  | { kind: 'acquire'; advanceMs: number }
  /** Acquire until refused, then release every lease held with `signal` (a round trip at full use). */
  | { kind: 'round'; signal: LimitSignal; advanceMs: number }
  | { kind: 'release'; pick: number; signal: LimitSignal; latencyMs: number; advanceMs: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constant('round' as const),
    signal: fc.constantFrom<LimitSignal>('success', 'success', 'overload', 'throttled', 'pause'),
    advanceMs: fc.integer({ min: 1, max: 50 }),
  }),
  fc.record({ kind: fc.constant('acquire' as const), advanceMs: fc.integer({ min: 0, max: 50 }) }),
  fc.record({
    kind: fc.constant('release' as const),
    pick: fc.nat(),
    signal: fc.constantFrom<LimitSignal>(
      'success',
      'success',
      'success',
      'overload',
      'throttled',
      'throttled',
      'pause',
      'neutral',
    ),
    latencyMs: fc.oneof(fc.integer({ min: 0, max: 20 }), fc.integer({ min: 0, max: 1_500 })),
    advanceMs: fc.integer({ min: 0, max: 50 }),
  }),
);

describe('the limit scripts agree with src/policy/limit/aimd.ts', () => {
  it(
    'random acquires and releases: same admissions, same limit, threshold, last decrease, peak and 429 streak as the pure model',
    { timeout: 120_000 },
    async () => {
      const name = uniqueQueueName('limit-prop');
      onCleanup(() => cleanQueue(redis, name));
      const store = new LimitStore(redis, name);
      const keys = requeueKeys(name);
      await fc.assert(
        fc.asyncProperty(params, fc.array(op, { minLength: 1, maxLength: 60 }), async (p, ops) => {
          await redis.del(keys.limit('k'), keys.limitLeases('k'), keys.limitKeys);
          let model: LimitState = initialLimitState(p);
          let held: { token: string; startedAt: number }[] = [];
          // Near Redis's own time, so the TTLs the scripts set are real ones.
          let now = Date.now();
          let n = 0;
          for (const o of ops) {
            now += o.advanceMs;
            const acquire = async (): Promise<boolean> => {
              const token = `t${++n}`;
              const got = await store.acquire('k', token, p, now);
              expect(got.admitted).toBe(held.length < Math.floor(model.limit));
              expect(got.limit).toBe(model.limit);
              if (got.admitted) held.push({ token, startedAt: now });
              return got.admitted;
            };
            const release = async (pick: number, signal: LimitSignal, latencyMs: number) => {
              const lease = held[pick % held.length]!;
              const inFlight = held.length;
              held = held.filter((h) => h !== lease);
              const sample = { signal, latencyMs, startedAt: lease.startedAt };
              const got = await store.release('k', lease.token, sample, p, now);
              model = nextLimit(model, { ...sample, inFlight, now }, p);
              expect({ ...got }).toEqual({ ...model, inFlight: held.length });
              // Nothing left to remember: nothing stored.
              if (held.length === 0 && model.limit >= p.initial && model.throttles === 0) {
                expect(await redis.exists(keys.limit('k'), keys.limitLeases('k'))).toBe(0);
                expect(await redis.zscore(keys.limitKeys, 'k')).toBeNull();
                model = initialLimitState(p);
              }
            };
            if (o.kind === 'acquire') await acquire();
            else if (o.kind === 'round') {
              while (await acquire());
              now += o.advanceMs;
              while (held.length > 0) await release(0, o.signal, 1);
            } else if (held.length > 0) await release(o.pick, o.signal, o.latencyMs);
          }
        }),
        { numRuns: 200 },
      );
    },
  );
});

describe('limit store', () => {
  it('a crashed holder’s lease expires: its place comes back after leaseMs', async () => {
    const name = uniqueQueueName('limit-lease');
    onCleanup(() => cleanQueue(redis, name));
    const store = new LimitStore(redis, name);
    const p: LimitParams = { ...parseAdaptiveConcurrency({ initial: 2 }), leaseMs: 1_000 };
    const t = Date.now();
    expect((await store.acquire('k', 'a', p, t)).admitted).toBe(true);
    expect((await store.acquire('k', 'b', p, t)).admitted).toBe(true);
    expect((await store.acquire('k', 'c', p, t + 999)).admitted).toBe(false);
    // 'a' and 'b' never come back (their worker died).
    expect(await store.acquire('k', 'c', p, t + 1_001)).toMatchObject({
      admitted: true,
      inFlight: 1,
    });
  });

  it('lists keys with state, reads only, expired leases not counted', async () => {
    const name = uniqueQueueName('limit-list');
    onCleanup(() => cleanQueue(redis, name));
    const store = new LimitStore(redis, name);
    const p: LimitParams = { ...parseAdaptiveConcurrency({}), leaseMs: 60_000 };
    await store.acquire('a', 'x', p);
    await store.acquire('b', 'y', p);
    await store.acquire('b', 'z', p);
    await store.release('b', 'z', { signal: 'overload', latencyMs: 5, startedAt: 0 }, p);
    const views = await store.list();
    expect(views).toEqual([
      expect.objectContaining({ key: 'b', limit: 7, threshold: 7, inFlight: 1 }),
      { key: 'a', limit: null, threshold: null, inFlight: 1, decreasedAt: 0 },
    ]);
    expect(await store.count()).toBe(2);
  });
});
