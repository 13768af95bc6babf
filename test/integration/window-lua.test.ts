import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  addToWindow,
  dropCounters,
  emptyWindow,
  parseWindowHash,
  windowSums,
  type WindowGeometry,
  type WindowHash,
} from '../../src/policy/window.js';
import { requeueKeys } from '../../src/redis/keys.js';
import { readWindow, recordBreakerWindow } from '../../src/redis/window-scripts.js';
import { runScript } from '../../src/redis/scripts.js';
import { cleanQueue, connect, uniqueQueueName } from '../harness/redis.js';
import { onCleanup } from '../harness/cleanup.js';

let redis: Redis;
beforeAll(() => {
  redis = connect();
});
afterAll(() => {
  redis.disconnect();
});

/**
 * Geometries a writer may propose. Buckets of at least a second keep the
 * hash's TTL (a bucket past its window) longer than a whole sequence runs,
 * so no key expires in real time while the test places writes in made-up time.
 */
const geometry = fc.record({
  bucketMs: fc.integer({ min: 1_000, max: 7_919 }),
  buckets: fc.integer({ min: 1, max: 12 }),
});

type Op =
  | {
      kind: 'record';
      /** From the sequence's origin; writes go back and forth in time. */
      offsetMs: number;
      proposed: WindowGeometry;
      successes: number;
      failures: number;
      trailing: number;
      /**
       * Counted by job (`countJob`): the jobs and failures the batch adds,
       * which may be 0 or negative while attempts happened.
       */
      byJob?: { total: number; failures: number };
    }
  | { kind: 'reset' }
  /** A close from half-open: `breakerCas` forgets the failures, keeps the jobs. */
  | { kind: 'close' };

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 12,
    arbitrary: fc
      .record({
        offsetMs: fc.integer({ min: -60_000, max: 200_000 }),
        proposed: geometry,
        successes: fc.integer({ min: 0, max: 5 }),
        failures: fc.integer({ min: 0, max: 5 }),
        trailing: fc.nat(5),
      })
      .map((r) => ({ kind: 'record' as const, ...r, trailing: Math.min(r.trailing, r.failures) })),
  },
  {
    weight: 6,
    arbitrary: fc
      .record({
        offsetMs: fc.integer({ min: -60_000, max: 200_000 }),
        proposed: geometry,
        successes: fc.integer({ min: 0, max: 5 }),
        failures: fc.integer({ min: 0, max: 5 }),
        trailing: fc.nat(5),
        byJob: fc.record({
          total: fc.integer({ min: 0, max: 5 }),
          failures: fc.integer({ min: -5, max: 5 }),
        }),
      })
      .map((r) => ({ kind: 'record' as const, ...r, trailing: Math.min(r.trailing, r.failures) })),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'reset' as const }) },
  { weight: 2, arbitrary: fc.constant({ kind: 'close' as const }) },
);

describe('the Lua window writers agree with src/policy/window.ts', () => {
  it(
    'random breaker outcomes at random times: same hash, same sums, as the pure model',
    { timeout: 120_000 },
    async () => {
      const name = uniqueQueueName('win-prop');
      onCleanup(() => cleanQueue(redis, name));
      const keys = requeueKeys(name);
      const scriptKeys = {
        window: keys.breakerWindow('k'),
        state: keys.breaker('k'),
        seenKeys: keys.breakerSeenKeys,
        openKeys: keys.breakerOpenKeys,
        statePrefix: keys.breakerPrefix,
      };
      await fc.assert(
        fc.asyncProperty(
          // Any origin, so bucket boundaries fall anywhere relative to the writes.
          fc.integer({ min: 1_000_000, max: 2 ** 44 }),
          fc.array(op, { minLength: 1, maxLength: 40 }),
          async (origin, ops) => {
            await redis.del(scriptKeys.window);
            let model: WindowHash = emptyWindow;
            for (const o of ops) {
              if (o.kind === 'reset') {
                await redis.del(scriptKeys.window);
                model = emptyWindow;
                continue;
              }
              if (o.kind === 'close') {
                const version = Number((await redis.hget(scriptKeys.state, 'v')) ?? 0);
                const closed = JSON.stringify({
                  phase: 'closed',
                  trips: 0,
                  probes: {},
                  probeSuccesses: 0,
                });
                await runScript(
                  redis,
                  'breakerCas',
                  [
                    scriptKeys.state,
                    scriptKeys.window,
                    keys.breakerOpenKeys,
                    keys.breakerIsolatedKeys,
                  ],
                  [version, closed, 'closed', 'k', keys.breakerChannel, '', 2, '', 0],
                );
                model = dropCounters(model, 'f', ['cf']);
                expect(parseWindowHash(await redis.hgetall(scriptKeys.window))).toEqual(model);
                continue;
              }
              const at = origin + o.offsetMs;
              const attempts = o.successes + o.failures;
              const total = o.byJob?.total ?? attempts;
              const failures = o.byJob?.failures ?? o.failures;
              const result = await recordBreakerWindow(
                redis,
                scriptKeys,
                {
                  geometry: o.proposed,
                  total,
                  failures,
                  trailingFailures: o.trailing,
                  hadSuccess: o.successes > 0,
                  breakerKey: 'k',
                  ...(o.byJob ? { attempts } : {}),
                },
                at,
              );
              // The model: the pure writer (which adds only when attempts
              // happened, and prunes either way), and the breaker's
              // failures-in-a-row field.
              model = addToWindow(
                model,
                at,
                o.proposed,
                attempts > 0 ? { t: total, f: failures } : {},
              );
              if (attempts > 0) {
                const cf = o.successes > 0 ? o.trailing : Number(model.other.cf ?? 0) + o.trailing;
                model = { ...model, other: { ...model.other, cf: String(cf) } };
              }
              const stored = parseWindowHash(await redis.hgetall(scriptKeys.window));
              expect(stored).toEqual(model);
              const sums = windowSums(model, at);
              expect([result.total, result.failures]).toEqual([sums.t ?? 0, sums.f ?? 0]);
              expect(result.consecutiveFailures).toBe(Number(model.other.cf ?? 0));
              if (model.geometry) {
                expect(result.geometry).toEqual(model.geometry);
                const ttl = await redis.pttl(scriptKeys.window);
                expect(ttl).toBeGreaterThan(0);
                expect(ttl).toBeLessThanOrEqual(
                  model.geometry.bucketMs * (model.geometry.buckets + 1),
                );
              }
            }
          },
        ),
        { numRuns: 150 },
      );
    },
  );

  it('without a time override the writers run on Redis’s clock, as readers do', async () => {
    const name = uniqueQueueName('win-time');
    onCleanup(() => cleanQueue(redis, name));
    const keys = requeueKeys(name);
    const scriptKeys = {
      window: keys.breakerWindow('k'),
      state: keys.breaker('k'),
      seenKeys: keys.breakerSeenKeys,
      openKeys: keys.breakerOpenKeys,
      statePrefix: keys.breakerPrefix,
    };
    const proposed = { bucketMs: 60_000, buckets: 5 };
    const [seconds] = await redis.time();
    await recordBreakerWindow(redis, scriptKeys, {
      geometry: proposed,
      total: 3,
      failures: 1,
      trailingFailures: 1,
      hadSuccess: true,
      breakerKey: 'k',
    });
    const { window, nowMs } = await readWindow(redis, scriptKeys.window);
    // The bucket is Redis's minute, whatever this process's clock says.
    const starts = Object.keys(window.counters).map((f) => Number(f.split(':')[0]));
    for (const start of starts) {
      expect(start % 60_000).toBe(0);
      expect(Math.abs(start - Number(seconds) * 1000)).toBeLessThan(120_000);
    }
    expect(windowSums(window, nowMs)).toEqual({ t: 3, f: 1 });
  });
});
