import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/env.js';
import { parseBreakerOptions } from '../../src/policy/breaker/breaker-options.js';
import {
  admit,
  closedState,
  onProbeResult,
  onWindow,
  shouldTrip,
  type BreakerState,
} from '../../src/policy/breaker/breaker.js';
import { T0, options, stats, tripped, halfOpen } from './breaker-helpers.js';

describe('breaker options', () => {
  it('fills in every default', () => {
    expect(parseBreakerOptions({})).toEqual({
      failureRate: 0.5,
      minimumRequests: 10,
      windowMs: 10_000,
      buckets: 10,
      openMs: 5_000,
      openFactor: 2,
      maxOpenMs: 30_000,
      halfOpenProbes: 1,
      halfOpenSuccessRatio: 1,
      probeTimeoutMs: 30_000,
      halfOpenRetryMs: 1_000,
      firstTryProbeDelayMs: 1_000,
      isolatedRetryMs: 10_000,
      maxDeferrals: 1_000,
      flushIntervalMs: 100,
      flushSize: 64,
      idleMs: 600_000,
    });
  });

  it.each([
    [{ failureRate: 0 }, 'breaker.failureRate'],
    [{ failureRate: 1.5 }, 'breaker.failureRate'],
    [{ minimumRequests: 0 }, 'breaker.minimumRequests'],
    [{ windowMs: -1 }, 'breaker.windowMs'],
    [{ buckets: 601 }, 'breaker.buckets'],
    [{ consecutiveFailures: 0 }, 'breaker.consecutiveFailures'],
    [{ openMs: 1.5 }, 'breaker.openMs'],
    [{ openFactor: 0.5 }, 'breaker.openFactor'],
    [{ openMs: 10_000, maxOpenMs: 5_000 }, 'breaker.maxOpenMs'],
    [{ halfOpenProbes: 0 }, 'breaker.halfOpenProbes'],
    [{ probeTimeoutMs: 0 }, 'breaker.probeTimeoutMs'],
    [{ halfOpenRetryMs: 0 }, 'breaker.halfOpenRetryMs'],
    [{ firstTryProbeDelayMs: -1 }, 'breaker.firstTryProbeDelayMs'],
    [{ maxDeferrals: 0 }, 'breaker.maxDeferrals'],
    [{ flushIntervalMs: 0 }, 'breaker.flushIntervalMs'],
    [{ flushSize: 0 }, 'breaker.flushSize'],
  ])('rejects %j naming %s', (input, field) => {
    expect(() => parseBreakerOptions(input)).toThrow(ConfigError);
    expect(() => parseBreakerOptions(input)).toThrow(new RegExp(`^${field.replace('.', '\\.')}: `));
  });

  it('names unknown keys, and uses the label it is given', () => {
    expect(() => parseBreakerOptions({ failureRatio: 0.5 })).toThrow(
      'breaker: unknown key "failureRatio"',
    );
    expect(() => parseBreakerOptions({ openMs: 0 }, 'worker.breaker')).toThrow(
      /^worker\.breaker\.openMs: /,
    );
  });
});

describe('tripping a closed circuit', () => {
  const o = options({ failureRate: 0.5, minimumRequests: 10 });

  it('trips on the failure rate only once the window holds minimumRequests outcomes', () => {
    // Every outcome failed, but there are too few of them to judge.
    for (let total = 1; total < 10; total += 1) {
      expect(shouldTrip(stats(total, total), o)).toBe(false);
      const step = onWindow(closedState(), stats(total, total), T0, o);
      expect(step.transition).toBeUndefined();
      expect(step.state.phase).toBe('closed');
    }
    expect(shouldTrip(stats(10, 10), o)).toBe(true);
  });

  it('trips at the failure rate (≥), not below it', () => {
    expect(shouldTrip(stats(10, 4), o)).toBe(false);
    expect(shouldTrip(stats(10, 5), o)).toBe(true);
    expect(shouldTrip(stats(1000, 499), o)).toBe(false);
    expect(shouldTrip(stats(1000, 500), o)).toBe(true);
  });

  it('trips on consecutive failures, whatever the volume, when set', () => {
    const c = options({ minimumRequests: 100, consecutiveFailures: 3 });
    expect(shouldTrip(stats(2, 2, 2), c)).toBe(false);
    expect(shouldTrip(stats(3, 3, 3), c)).toBe(true);
    // Rate well under the threshold: the run of failures alone trips it.
    expect(shouldTrip(stats(90, 3, 3), c)).toBe(true);
    // Unset, a run of failures means nothing below minimumRequests.
    expect(shouldTrip(stats(3, 3, 3), options({ minimumRequests: 100 }))).toBe(false);
  });

  it('opens for openMs from the trip, with trips counted', () => {
    const step = onWindow(closedState(), stats(10, 10), T0, o);
    expect(step.transition).toBe('opened');
    expect(step.state).toEqual({
      phase: 'open',
      openedAt: T0,
      halfOpenAt: T0 + o.openMs,
      trips: 1,
      probes: {},
      probeSuccesses: 0,
    });
  });

  it('only a closed circuit trips on its window', () => {
    const open = tripped(o);
    const again = onWindow(open, stats(100, 100, 100), T0 + 1, o);
    expect(again.transition).toBeUndefined();
    expect(again.state).toBe(open);
    const half = halfOpen(o);
    expect(onWindow(half, stats(100, 100, 100), T0 + o.openMs, o).state).toBe(half);
  });
});

describe('open → half-open', () => {
  const o = options({ openMs: 5_000, halfOpenRetryMs: 700 });

  it('rejects until halfOpenAt, with halfOpenAt as the time to come back', () => {
    const open = tripped(o);
    for (const now of [T0, T0 + 1, open.halfOpenAt! - 1]) {
      const step = admit(open, now, 'p', o);
      expect(step.verdict).toEqual({ kind: 'reject', retryAt: open.halfOpenAt });
      expect(step.transition).toBeUndefined();
      // Nothing to write: the same state comes back.
      expect(step.state).toBe(open);
    }
  });

  it('goes half-open at halfOpenAt exactly, the first caller becoming a probe', () => {
    const open = tripped(o);
    const step = admit(open, open.halfOpenAt!, 'p1', o);
    expect(step.transition).toBe('half-open');
    expect(step.verdict).toEqual({ kind: 'probe', probeId: 'p1' });
    expect(step.state.phase).toBe('half-open');
    expect(step.state.probes).toEqual({ p1: open.halfOpenAt! + o.probeTimeoutMs });
    expect(step.state.trips).toBe(1);
  });
});

describe('half-open probes', () => {
  it.each([1, 2, 3, 7])('admits exactly halfOpenProbes (%i) at once', (probes) => {
    const o = options({ halfOpenProbes: probes, halfOpenRetryMs: 250 });
    let state: BreakerState = tripped(o);
    const at = tripped(o).halfOpenAt;
    const verdicts: string[] = [];
    for (let i = 0; i < 20; i += 1) {
      const step = admit(state, at + i, `p${i}`, o);
      state = step.state;
      verdicts.push(step.verdict.kind);
      if (step.verdict.kind === 'reject') expect(step.verdict.retryAt).toBe(at + i + 250);
    }
    expect(verdicts.filter((v) => v === 'probe')).toHaveLength(probes);
    expect(verdicts.slice(0, probes).every((v) => v === 'probe')).toBe(true);
    expect(Object.keys(state.probes)).toHaveLength(probes);
  });

  it('a probe whose lease expired frees its slot, and its late result is ignored', () => {
    const o = options({ halfOpenProbes: 1, probeTimeoutMs: 2_000 });
    const half = halfOpen(o, 'lost');
    const leaseEnd = half.probes.lost!;
    // Still leased: no second probe.
    expect(admit(half, leaseEnd - 1, 'other', o).verdict.kind).toBe('reject');
    // At the lease's end the slot is free again.
    const step = admit(half, leaseEnd, 'other', o);
    expect(step.verdict).toEqual({ kind: 'probe', probeId: 'other' });
    expect(Object.keys(step.state.probes)).toEqual(['other']);
    // The lost probe reports after all: neither a failure nor a success counts.
    expect(onProbeResult(step.state, 'lost', false, leaseEnd + 1, o).state).toBe(step.state);
    expect(onProbeResult(step.state, 'lost', true, leaseEnd + 1, o).state).toBe(step.state);
  });

  it('a result from something that was never a probe changes nothing', () => {
    const o = options();
    const half = halfOpen(o);
    expect(onProbeResult(half, 'stranger', false, T0, o).state).toBe(half);
    expect(onProbeResult(closedState(), 'p0', false, T0, o).transition).toBeUndefined();
  });

  it('closes after halfOpenProbes successes, with a clean slate', () => {
    const o = options({ halfOpenProbes: 2 });
    let state = halfOpen(o, 'a');
    const at = state.probes.a! - o.probeTimeoutMs;
    state = admit(state, at, 'b', o).state;
    const first = onProbeResult(state, 'a', true, at + 10, o);
    expect(first.transition).toBeUndefined();
    expect(first.state.phase).toBe('half-open');
    expect(first.state.probeSuccesses).toBe(1);
    // A success keeps its slot for this period: no third probe while b is out.
    expect(admit(first.state, at + 11, 'c', o).verdict.kind).toBe('reject');
    const second = onProbeResult(first.state, 'b', true, at + 20, o);
    expect(second.transition).toBe('closed');
    expect(second.state).toEqual(closedState());
  });

  it('a probe failure reopens at once, with one more trip', () => {
    const o = options({ halfOpenProbes: 2, openMs: 1_000, openFactor: 1 });
    let state = halfOpen(o, 'a');
    const at = state.probes.a! - o.probeTimeoutMs;
    state = admit(state, at, 'b', o).state;
    state = onProbeResult(state, 'a', true, at + 5, o).state;
    const failed = onProbeResult(state, 'b', false, at + 9, o);
    expect(failed.transition).toBe('opened');
    expect(failed.state).toMatchObject({
      phase: 'open',
      openedAt: at + 9,
      halfOpenAt: at + 9 + 1_000,
      trips: 2,
      probes: {},
      probeSuccesses: 0,
    });
  });
});

describe('a breaker that closes on a success ratio (halfOpenSuccessRatio < 1)', () => {
  const o = parseBreakerOptions({
    halfOpenProbes: 4,
    halfOpenSuccessRatio: 0.5,
    openMs: 1_000,
  });
  const halfOpen = (): BreakerState => ({
    phase: 'half-open',
    trips: 1,
    probes: {},
    probeSuccesses: 0,
    probeFailures: 0,
  });

  it('ramps probes up: one at first, one more in flight for each success', () => {
    let state = halfOpen();
    const first = admit(state, 0, 'p1', o);
    expect(first.verdict).toEqual({ kind: 'probe', probeId: 'p1' });
    state = first.state;
    expect(admit(state, 0, 'p2', o).verdict.kind).toBe('reject');
    state = onProbeResult(state, 'p1', true, 0, o).state;
    const second = admit(state, 0, 'p2', o);
    expect(second.verdict.kind).toBe('probe');
    const third = admit(second.state, 0, 'p3', o);
    expect(third.verdict.kind).toBe('probe');
    expect(admit(third.state, 0, 'p4', o).verdict.kind).toBe('reject');
  });

  it('a flaky dependency that answers half the time closes the circuit', () => {
    let state = halfOpen();
    const outcomes = [true, false, true, false];
    for (const [i, ok] of outcomes.entries()) {
      state = admit(state, 0, `p${i}`, o).state;
      const step = onProbeResult(state, `p${i}`, ok, 0, o);
      state = step.state;
      if (i < outcomes.length - 1) expect(step.transition).toBeUndefined();
      else expect(step.transition).toBe('closed');
    }
    expect(state.phase).toBe('closed');
  });

  it('a dependency that keeps failing opens it again once the ratio is out of reach', () => {
    let state = halfOpen();
    // Two failures of four still leave 50 % within reach; the third does not.
    for (const id of ['p1', 'p2']) {
      state = admit(state, 0, id, o).state;
      state = onProbeResult(state, id, false, 0, o).state;
      expect(state.phase).toBe('half-open');
    }
    state = admit(state, 0, 'p3', o).state;
    const step = onProbeResult(state, 'p3', false, 0, o);
    expect(step.transition).toBe('opened');
    expect(step.state.phase).toBe('open');
  });
});
