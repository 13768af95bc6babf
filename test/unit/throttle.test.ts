import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  admits,
  initialLimitState,
  nextLimit,
  type LimitState,
} from '../../src/policy/limit/aimd.js';
import { parseAdaptiveConcurrency } from '../../src/policy/limit/limit-options.js';
import { recoveredLimit } from '../../src/policy/limit/recovery.js';
import { reactToThrottle, throttlePauseMs } from '../../src/policy/limit/throttle.js';

/** The reference time of these tests. */
const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);
const o = parseAdaptiveConcurrency({});

describe('a 429: the job waits, the key pauses whole only when it keeps answering 429 (reactToThrottle)', () => {
  it('up to four 429s in a row slow the key down and pause nothing', () => {
    for (const throttles of [1, 2, 3, 4])
      expect(reactToThrottle({ throttles, retryAfterMs: 1_000, now: T0 }, o)).toEqual({
        action: 'slow-down',
      });
  });

  it('the fifth 429 in a row (no success between) pauses the whole key until its Retry-After', () => {
    expect(reactToThrottle({ throttles: 5, retryAfterMs: 1_000, now: T0 }, o)).toEqual({
      action: 'pause',
      until: T0 + 1_000,
      because: 'streak',
    });
    expect(reactToThrottle({ throttles: 40, retryAfterMs: 2_500, now: T0 }, o)).toMatchObject({
      until: T0 + 2_500,
    });
  });

  it('without a Retry-After the streak pauses for throttlePauseMs (1 s)', () => {
    expect(throttlePauseMs).toBe(1_000);
    expect(reactToThrottle({ throttles: 5, retryAfterMs: undefined, now: T0 }, o)).toEqual({
      action: 'pause',
      until: T0 + 1_000,
      because: 'streak',
    });
    expect(reactToThrottle({ throttles: 4, retryAfterMs: undefined, now: T0 }, o).action).toBe(
      'slow-down',
    );
  });

  it('a Retry-After of pauseRetryAfterMs (30 s) or more pauses the key at the first 429', () => {
    expect(reactToThrottle({ throttles: 1, retryAfterMs: 30_000, now: T0 }, o)).toEqual({
      action: 'pause',
      until: T0 + 30_000,
      because: 'long-retry-after',
    });
    expect(reactToThrottle({ throttles: 1, retryAfterMs: 29_999, now: T0 }, o).action).toBe(
      'slow-down',
    );
  });

  it('follows its options: pauseAfter429s 1 is issue 13’s rule (every 429 pauses)', () => {
    const strict = parseAdaptiveConcurrency({ pauseAfter429s: 1 });
    expect(reactToThrottle({ throttles: 1, retryAfterMs: 1_000, now: T0 }, strict).action).toBe(
      'pause',
    );
  });
});

describe('the streak of 429s, kept with the key’s limit (nextLimit)', () => {
  it('counts every 429, even one that ran under an older limit, and a success resets it', () => {
    let state = initialLimitState(o);
    const answer = (signal: 'throttled' | 'success' | 'overload', startedAt: number) => {
      state = nextLimit(state, { signal, latencyMs: 5, inFlight: 10, startedAt, now: T0 + 10 }, o);
    };
    answer('throttled', T0);
    answer('throttled', T0 - 5); // started before the cut: neutral for the limit, still a 429
    answer('overload', T0); // a 503 is not a success
    expect(state.throttles).toBe(2);
    answer('success', T0 - 5);
    expect(state.throttles).toBe(0);
  });
});

describe('after a 429 the limit is cut ×backoffRatio, then recovers along CUBIC’s curve', () => {
  it('recoveredLimit: β × peak at the cut, peak at recoveryMs, concave (fast first), never above peak before it', () => {
    const peak = 40;
    expect(recoveredLimit(peak, 0, o)).toBeCloseTo(28, 10);
    expect(recoveredLimit(peak, o.recoveryMs, o)).toBe(peak);
    expect(recoveredLimit(peak, o.recoveryMs * 10, o)).toBe(peak);
    // Half-way in time it has made up (1 − 1/8) of the cut.
    expect(recoveredLimit(peak, o.recoveryMs / 2, o)).toBeCloseTo(40 - 12 / 8, 10);
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1_999 }), fc.integer({ min: 1, max: 500 }), (t, dt) => {
        const a = recoveredLimit(peak, t, o);
        const b = recoveredLimit(peak, Math.min(o.recoveryMs, t + dt), o);
        expect(a).toBeLessThanOrEqual(b);
        expect(a).toBeLessThan(peak);
        expect(a).toBeGreaterThanOrEqual(28 - 1e-9);
      }),
      { seed: 22, numRuns: 500 },
    );
  });

  it('a cut once per round trip, then back to the old limit in recoveryMs, not all at once', () => {
    let state: LimitState = { limit: 40, threshold: 40, decreasedAt: 0, peak: 0, throttles: 0 };
    // 40 attempts started together at T0; 10 of them answer 429: one cut.
    for (let i = 0; i < 10; i++)
      state = nextLimit(
        state,
        { signal: 'throttled', latencyMs: 5, inFlight: 40, startedAt: T0, now: T0 + 5 + i },
        o,
      );
    expect(state).toMatchObject({ limit: 28, threshold: 28, peak: 40, throttles: 10 });
    expect(state.decreasedAt).toBe(T0 + 5);
    // Then round trips of 10 ms (a fast endpoint) at full use, every attempt succeeding.
    const cut = state.decreasedAt;
    let now = cut;
    const at = new Map<number, number>();
    while (now < cut + 2_000) {
      now += 10;
      const admitted = admits(state.limit, o);
      for (let i = 0; i < admitted; i++)
        state = nextLimit(
          state,
          { signal: 'success', latencyMs: 5, inFlight: admitted, startedAt: now - 9, now },
          o,
        );
      at.set(now - cut, admits(state.limit, o));
    }
    // By the clock, not by round trips: 200 round trips, yet 2 s to come back;
    // most of the cut back in the first second (CUBIC's concave side).
    expect(at.get(100)).toBe(29);
    expect(at.get(500)).toBe(34); // 40 × (1 − 0.3 × 0.75³)
    expect(at.get(1_000)).toBe(38);
    expect(at.get(1_990)).toBe(39);
    expect(at.get(2_000)).toBe(40);
    const seen = [...at.values()];
    for (let i = 1; i < seen.length; i++) expect(seen[i]).toBeGreaterThanOrEqual(seen[i - 1]!);
    expect(state.peak).toBe(0);
    expect(state.throttles).toBe(0);
  });

  it('an overload during the recovery ends it: AIMD from there', () => {
    let state: LimitState = { limit: 28, threshold: 28, decreasedAt: T0, peak: 40, throttles: 1 };
    state = nextLimit(
      state,
      { signal: 'overload', latencyMs: 5, inFlight: 28, startedAt: T0 + 1, now: T0 + 50 },
      o,
    );
    expect(state).toMatchObject({ peak: 0, decreasedAt: T0 + 50 });
    expect(state.limit).toBeCloseTo(19.6, 10);
  });
});
