import { describe, expect, it } from 'vitest';
import { reconnectBackoff, reconnectDelay } from '../../src/policy/reconnect.js';
import { createRedis, reconnectStrategy } from '../../src/redis/connection.js';
import { seededRandom } from '../../src/util/random.js';

const N = 20_000;

/** The ceiling of attempt `times`: `min(capMs, baseMs · 2^(times − 1))`. */
function ceiling(times: number): number {
  return Math.min(reconnectBackoff.capMs, reconnectBackoff.baseMs * 2 ** (times - 1));
}

describe('reconnectDelay', () => {
  it('stays in [ceiling / 2, ceiling] on every sample, the ceiling doubling from 100 ms to the 2 s cap', () => {
    const random = seededRandom(20261122);
    for (const times of [1, 2, 3, 4, 5, 6, 10, 50, 1_000, 1e9]) {
      let lo = Infinity;
      let hi = -Infinity;
      let integers = true;
      for (let i = 0; i < N; i++) {
        const d = reconnectDelay(times, random);
        integers &&= Number.isInteger(d);
        lo = Math.min(lo, d);
        hi = Math.max(hi, d);
      }
      expect(integers).toBe(true);
      const c = ceiling(times);
      expect(lo).toBeGreaterThanOrEqual(Math.round(c / 2));
      expect(hi).toBeLessThanOrEqual(c);
      // Jittered: the draws cover the range, they are not one fixed wait.
      expect(hi - lo).toBeGreaterThan(0.45 * c);
    }
    expect(ceiling(1)).toBe(100);
    expect(ceiling(6)).toBe(2_000);
  });

  it('is never 0 and never above the cap, even for counts ioredis never gives', () => {
    const random = seededRandom(7);
    for (const times of [0, -3, 0.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      const d = reconnectDelay(times, random);
      expect(d).toBeGreaterThanOrEqual(50);
      expect(d).toBeLessThanOrEqual(reconnectBackoff.capMs);
    }
  });

  it('repeats with the same seed', () => {
    const a = seededRandom(42);
    const b = seededRandom(42);
    const xs = Array.from({ length: 20 }, (_, i) => reconnectDelay(i + 1, a));
    const ys = Array.from({ length: 20 }, (_, i) => reconnectDelay(i + 1, b));
    expect(xs).toEqual(ys);
  });
});

describe('createRedis', () => {
  it("reconnects with requeue's backoff, not ioredis's fixed default, and so do its duplicates (BullMQ's blocking connection)", () => {
    const redis = createRedis('redis://127.0.0.1:1', { lazyConnect: true });
    const copy = redis.duplicate();
    try {
      expect(redis.options.retryStrategy).toBe(reconnectStrategy);
      expect(copy.options.retryStrategy).toBe(reconnectStrategy);
      for (let times = 1; times < 30; times++) {
        const d = reconnectStrategy(times);
        expect(d).toBeGreaterThanOrEqual(Math.round(ceiling(times) / 2));
        expect(d).toBeLessThanOrEqual(ceiling(times));
      }
    } finally {
      copy.disconnect();
      redis.disconnect();
    }
  });
});
