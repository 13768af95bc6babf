import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors/config-error.js';
import {
  admits,
  initialLimitState,
  nextLimit,
  type LimitSample,
  type LimitSignal,
  type LimitState,
} from '../../src/policy/limit/aimd.js';
import {
  leaseMsOf,
  parseAdaptiveConcurrency,
  type AdaptiveConcurrency,
} from '../../src/policy/limit/limit-options.js';
import { seededRandom } from '../../src/util/random.js';

/** The reference time of these tests. */
const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);
const defaults = parseAdaptiveConcurrency({});

function sample(over: Partial<LimitSample> & { signal: LimitSignal }): LimitSample {
  return { latencyMs: 10, inFlight: 1_000, startedAt: T0, now: T0, ...over };
}

describe('adaptive concurrency options', () => {
  it('defaults: floor 1, ceiling 100, initial 10, 5 s latency target, +1 per round trip, ×0.7', () => {
    expect(defaults).toEqual({
      floor: 1,
      ceiling: 100,
      initial: 10,
      latencyTargetMs: 5_000,
      additiveIncrease: 1,
      backoffRatio: 0.7,
      recoveryMs: 2_000,
      pauseAfter429s: 5,
      pauseRetryAfterMs: 30_000,
      idleMs: 600_000,
    });
    expect(leaseMsOf(defaults, undefined)).toBe(60_000);
    expect(leaseMsOf(defaults, 15_000)).toBe(20_000);
    expect(leaseMsOf({ ...defaults, leaseMs: 1_000 }, 15_000)).toBe(1_000);
  });

  it.each([
    [{ floor: 0 }, 'adaptiveConcurrency.floor'],
    [{ ceiling: 1.5 }, 'adaptiveConcurrency.ceiling'],
    [{ floor: 5, ceiling: 4, initial: 4 }, 'adaptiveConcurrency.floor: must be ≤ ceiling'],
    [{ initial: 200 }, 'adaptiveConcurrency.initial: must be between floor and ceiling'],
    [{ backoffRatio: 1 }, 'adaptiveConcurrency.backoffRatio'],
    [{ latencyTargetMs: 0 }, 'adaptiveConcurrency.latencyTargetMs'],
    [{ leaseMs: 10 }, 'adaptiveConcurrency.leaseMs'],
    [{ recoveryMs: 0 }, 'adaptiveConcurrency.recoveryMs'],
    [{ pauseAfter429s: 0 }, 'adaptiveConcurrency.pauseAfter429s'],
    [{ pauseRetryAfterMs: 1.5 }, 'adaptiveConcurrency.pauseRetryAfterMs'],
    [{ floor: '2' }, 'adaptiveConcurrency.floor'],
    [{ limit: 3 }, 'adaptiveConcurrency: unknown key "limit"'],
  ])('refuses %j with one line naming the field', (input, field) => {
    expect(() => parseAdaptiveConcurrency(input)).toThrow(ConfigError);
    expect(() => parseAdaptiveConcurrency(input)).toThrow(field);
  });
});

describe('AIMD limit (nextLimit)', () => {
  it('stays within [floor, ceiling], its threshold too, whatever the samples (bounds on every sample)', () => {
    const options = fc
      .record({
        floor: fc.integer({ min: 1, max: 20 }),
        span: fc.integer({ min: 0, max: 200 }),
        at: fc.double({ min: 0, max: 1, noNaN: true }),
        latencyTargetMs: fc.integer({ min: 1, max: 10_000 }),
        additiveIncrease: fc.double({ min: 0.01, max: 50, noNaN: true }),
        backoffRatio: fc.double({ min: 0.01, max: 0.99, noNaN: true }),
      })
      .map(({ floor, span, at, ...rest }) => ({
        ...defaults,
        ...rest,
        floor,
        ceiling: floor + span,
        initial: floor + Math.floor(at * span),
      }));
    const step = fc.record({
      signal: fc.constantFrom<LimitSignal>('success', 'overload', 'throttled', 'pause', 'neutral'),
      latencyMs: fc.integer({ min: 0, max: 20_000 }),
      inFlight: fc.integer({ min: 0, max: 400 }),
      ageMs: fc.integer({ min: 0, max: 5_000 }),
      advanceMs: fc.integer({ min: 0, max: 1_000 }),
    });
    fc.assert(
      fc.property(options, fc.array(step, { maxLength: 300 }), (o, steps) => {
        let state = initialLimitState(o);
        let now = T0;
        for (const s of steps) {
          now += s.advanceMs;
          state = nextLimit(state, { ...s, startedAt: now - s.ageMs, now }, o);
          expect(state.limit).toBeGreaterThanOrEqual(o.floor);
          expect(state.limit).toBeLessThanOrEqual(o.ceiling);
          expect(state.threshold).toBeGreaterThanOrEqual(o.floor);
          expect(state.threshold).toBeLessThanOrEqual(o.ceiling);
          expect(state.decreasedAt).toBeLessThanOrEqual(now);
          expect(state.peak === 0 || (state.peak >= o.floor && state.peak <= o.ceiling)).toBe(true);
          expect(state.throttles).toBeGreaterThanOrEqual(0);
          expect(admits(state.limit, o)).toBeGreaterThanOrEqual(o.floor);
        }
      }),
      { seed: 22, numRuns: 300 },
    );
  });

  it('grows about additiveIncrease per limit’s worth of successes (one round trip), not one per success', () => {
    let state: LimitState = { limit: 20, threshold: 20, decreasedAt: 0, peak: 0, throttles: 0 };
    for (let i = 0; i < 20; i++) state = nextLimit(state, sample({ signal: 'success' }), defaults);
    expect(state.limit).toBeGreaterThan(20.9);
    expect(state.limit).toBeLessThan(21.1);
  });

  it('does not grow a key that uses less than half its limit (an idle key keeps its limit)', () => {
    let state = initialLimitState(defaults);
    for (let i = 0; i < 1_000; i++)
      state = nextLimit(state, sample({ signal: 'success', inFlight: 4 }), defaults);
    expect(state.limit).toBe(defaults.initial);
  });

  it('counts a success slower than latencyTargetMs as overload', () => {
    const state = nextLimit(
      initialLimitState(defaults),
      sample({ signal: 'success', latencyMs: 5_001 }),
      defaults,
    );
    expect(state.limit).toBeCloseTo(7, 10);
    expect(state.decreasedAt).toBe(T0);
  });

  it('lowers the limit once per round trip: a burst of failures in flight together is one decrease', () => {
    let state: LimitState = { limit: 50, threshold: 50, decreasedAt: 0, peak: 0, throttles: 0 };
    const now = T0 + 1_000;
    // 50 attempts started together at T0 all fail.
    for (let i = 0; i < 50; i++)
      state = nextLimit(
        state,
        sample({ signal: 'overload', startedAt: T0, now: now + i }),
        defaults,
      );
    expect(state.limit).toBeCloseTo(35, 10);
    // An attempt started after that decrease shows overload again: a second decrease.
    state = nextLimit(
      state,
      sample({ signal: 'overload', startedAt: now + 60, now: now + 200 }),
      defaults,
    );
    expect(state.limit).toBeCloseTo(24.5, 10);
  });

  it('ignores neutral outcomes (a permanent 4xx, a deferral)', () => {
    const state: LimitState = { limit: 7.5, threshold: 9, decreasedAt: 3, peak: 0, throttles: 2 };
    expect(nextLimit(state, sample({ signal: 'neutral' }), defaults)).toEqual(state);
  });

  it('after a 429 pause restarts at the floor and recovers by slow start, gradually, not at once', () => {
    const o = { ...defaults, floor: 1 };
    let state: LimitState = { limit: 40, threshold: 40, decreasedAt: 0, peak: 0, throttles: 0 };
    let now = T0;
    state = nextLimit(state, sample({ signal: 'pause', startedAt: now, now }), o);
    expect(state).toEqual({ limit: 1, threshold: 28, decreasedAt: now, peak: 0, throttles: 0 });
    // Round trips at full use: every admitted attempt succeeds.
    const perRound: number[] = [];
    for (let round = 0; round < 12; round++) {
      now += 100;
      const admitted = admits(state.limit, o);
      for (let i = 0; i < admitted; i++)
        state = nextLimit(state, sample({ signal: 'success', inFlight: admitted, now }), o);
      perRound.push(admits(state.limit, o));
    }
    // Doubling while below the threshold (0.7 × 40), then about one more per round trip.
    expect(perRound.slice(0, 5)).toEqual([2, 4, 8, 16, 28]);
    expect(perRound[11]! - perRound[4]!).toBeGreaterThanOrEqual(6);
    expect(perRound[11]! - perRound[4]!).toBeLessThanOrEqual(8);
  });

  /**
   * A fleet against a server that can take `capacity` attempts at once and
   * fails the rest fast (a 503): many samples, the limit learned from them.
   */
  function fleetAgainst(capacity: number, o: AdaptiveConcurrency, rounds: number) {
    const random = seededRandom(7);
    let state = initialLimitState(o);
    let now = T0;
    const limits: number[] = [];
    const inFlights: number[] = [];
    let outOfBounds = 0;
    for (let round = 0; round < rounds; round++) {
      const startedAt = now;
      const inFlight = admits(state.limit, o);
      now += 50 + Math.floor(random() * 50);
      inFlights.push(inFlight);
      // Attempts finish in a random order; those past the capacity fail.
      const failing = Math.max(0, inFlight - capacity);
      const outcomes: LimitSignal[] = [
        ...Array<LimitSignal>(inFlight - failing).fill('success'),
        ...Array<LimitSignal>(failing).fill('overload'),
      ].sort(() => random() - 0.5);
      for (const signal of outcomes) {
        state = nextLimit(state, { signal, latencyMs: 60, inFlight, startedAt, now }, o);
        if (!(state.limit >= o.floor && state.limit <= o.ceiling)) outOfBounds += 1;
      }
      limits.push(state.limit);
    }
    expect(outOfBounds).toBe(0);
    return { limits, inFlights };
  }

  it('converges under a server’s capacity and stays near it (a sawtooth between ×0.7 and +1)', () => {
    for (const capacity of [5, 30, 80]) {
      const { inFlights } = fleetAgainst(capacity, defaults, 2_000);
      const late = inFlights.slice(1_000);
      const over = late.filter((n) => n > capacity).length / late.length;
      const mean = late.reduce((a, b) => a + b, 0) / late.length;
      // Probing one past the capacity is how AIMD finds it: one round trip in
      // 0.3 × capacity or so (measured: 34 % at 5, 10 % at 30, 4 % at 80).
      expect(over).toBeLessThan(capacity < 30 ? 0.4 : 0.12);
      expect(Math.max(...late)).toBe(capacity + 1);
      expect(mean).toBeGreaterThan(capacity * 0.8);
    }
  });

  it('climbs to the ceiling against a server with room to spare, and never past it', () => {
    const o = { ...defaults, ceiling: 40 };
    const { limits } = fleetAgainst(1_000, o, 500);
    expect(limits.at(-1)).toBe(40);
    expect(Math.max(...limits)).toBe(40);
  });
});
