import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/env.js';
import {
  parseBreakerOptions,
  type BreakerOptions,
  type BreakerOptionsInput,
} from '../../src/policy/breaker/breaker-options.js';
import {
  admit,
  closedState,
  forceClose,
  forceOpen,
  onProbeResult,
  onWindow,
  openDuration,
  shouldTrip,
  type BreakerState,
  type WindowStats,
} from '../../src/policy/breaker/breaker.js';
import { seededRandom } from '../../src/util/random.js';

/** The reference time of these tests: when the window first calls for a trip. */
const T0 = Date.UTC(2025, 0, 1, 12, 0, 0);

function options(input: BreakerOptionsInput = {}): BreakerOptions {
  return parseBreakerOptions(input);
}

function stats(total: number, failures: number, consecutiveFailures = 0): WindowStats {
  return { total, failures, consecutiveFailures };
}

type OpenState = Extract<BreakerState, { phase: 'open' }>;

/** `state`, which must be open (with its half-open time). */
function asOpen(state: BreakerState): OpenState {
  if (state.phase !== 'open') throw new Error(`expected an open circuit, not ${state.phase}`);
  return state;
}

/** A circuit tripped at `at` by a window of failures only. */
function tripped(o: BreakerOptions, at = T0): OpenState {
  const step = onWindow(
    closedState(),
    stats(o.minimumRequests, o.minimumRequests, o.minimumRequests),
    at,
    o,
  );
  expect(step.transition).toBe('opened');
  return asOpen(step.state);
}

/** A tripped circuit moved to half-open by its first probe, `first`. */
function halfOpen(o: BreakerOptions, first = 'p0'): BreakerState {
  const open = tripped(o);
  const step = admit(open, open.halfOpenAt, first, o);
  expect(step.transition).toBe('half-open');
  expect(step.verdict).toEqual({ kind: 'probe', probeId: first });
  return step.state;
}

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

describe('open duration', () => {
  it('grows by openFactor with each trip and stops at maxOpenMs', () => {
    const o = options({ openMs: 1_000, openFactor: 2, maxOpenMs: 5_000 });
    expect([1, 2, 3, 4, 5, 50, 5_000].map((trips) => openDuration(trips, o))).toEqual([
      1_000, 2_000, 4_000, 5_000, 5_000, 5_000, 5_000,
    ]);
    // No trips yet counts as the first.
    expect(openDuration(0, o)).toBe(1_000);
  });

  it('stays at openMs with openFactor 1', () => {
    const o = options({ openMs: 3_000, openFactor: 1 });
    for (const trips of [1, 2, 10, 1_000]) expect(openDuration(trips, o)).toBe(3_000);
  });

  it('by default opens 5 s, doubling per failed probe to 30 s (a short outage is found soon)', () => {
    const o = options({});
    expect([1, 2, 3, 4, 5, 100].map((trips) => openDuration(trips, o))).toEqual([
      5_000, 10_000, 20_000, 30_000, 30_000, 30_000,
    ]);
    // An openMs above the default cap is its own cap, as before; a maxOpenMs below it is refused.
    expect(options({ openMs: 60_000 }).maxOpenMs).toBe(60_000);
    expect(() => options({ openMs: 60_000, maxOpenMs: 30_000 })).toThrow('breaker.maxOpenMs');
  });

  it('reopening after failed probes waits openDuration(trips), capped', () => {
    const o = options({ openMs: 1_000, openFactor: 3, maxOpenMs: 20_000 });
    let state = tripped(o);
    const waits: number[] = [state.halfOpenAt - state.openedAt!];
    for (let round = 0; round < 5; round += 1) {
      const now = state.halfOpenAt;
      const probing = admit(state, now, `p${round}`, o).state;
      const step = onProbeResult(probing, `p${round}`, false, now + 1, o);
      expect(step.transition).toBe('opened');
      state = asOpen(step.state);
      waits.push(state.halfOpenAt! - state.openedAt!);
    }
    expect(waits).toEqual([1_000, 3_000, 9_000, 20_000, 20_000, 20_000]);
    expect(state.trips).toBe(6);
  });
});

describe('manual control', () => {
  const o = options({ openMs: 1_000 });

  it('forceOpen isolates: never half-open, whatever the time, until forceClose', () => {
    const step = forceOpen(closedState(), T0);
    expect(step.transition).toBe('opened');
    expect(step.state).toEqual({
      phase: 'isolated',
      openedAt: T0,
      trips: 0,
      probes: {},
      probeSuccesses: 0,
    });
    for (const later of [T0, T0 + o.openMs, T0 + o.maxOpenMs, T0 + 365 * 86_400_000]) {
      const verdict = admit(step.state, later, 'p', o);
      expect(verdict.transition).toBeUndefined();
      expect(verdict.verdict).toEqual({ kind: 'reject', retryAt: later + o.isolatedRetryMs });
    }
    // Neither the window nor a stray probe result moves it.
    expect(onWindow(step.state, stats(100, 0), T0, o).state).toBe(step.state);
    expect(onProbeResult(step.state, 'p', true, T0, o).state).toBe(step.state);
  });

  it('forceOpen of a tripped or half-open circuit isolates it too', () => {
    const fromOpen = forceOpen(tripped(o), T0 + 10);
    expect(fromOpen.state).toMatchObject({ phase: 'isolated', trips: 1 });
    expect(fromOpen.state).not.toHaveProperty('halfOpenAt');
    const fromHalf = forceOpen(halfOpen(o), T0 + 10);
    expect(fromHalf.transition).toBe('opened');
    expect(fromHalf.state).toMatchObject({ phase: 'isolated', probes: {} });
  });

  it('isolating a tripped circuit is a transition, so that it is published to the workers', () => {
    const isolated = forceOpen(tripped(o), T0 + 10);
    expect(isolated.transition).toBe('opened');
    // Isolating again changes nothing the workers need to hear about.
    expect(forceOpen(isolated.state, T0 + 20).transition).toBeUndefined();
  });

  it('forceClose resets any state to a clean closed one', () => {
    for (const state of [tripped(o), halfOpen(o), forceOpen(tripped(o), T0).state]) {
      const step = forceClose(state);
      expect(step.transition).toBe('closed');
      expect(step.state).toEqual(closedState());
    }
    expect(forceClose(closedState()).transition).toBeUndefined();
  });
});

describe('invariants over random histories', () => {
  it('never has more than halfOpenProbes probes out, and never opens longer than maxOpenMs', () => {
    const random = seededRandom(20250101);
    for (let run = 0; run < 200; run += 1) {
      const o = options({
        halfOpenProbes: 1 + Math.floor(random() * 4),
        openMs: 100 + Math.floor(random() * 900),
        openFactor: 1 + random() * 2,
        maxOpenMs: 5_000,
        probeTimeoutMs: 200 + Math.floor(random() * 800),
        minimumRequests: 1 + Math.floor(random() * 5),
      });
      let state = closedState();
      let now = T0;
      let ids = 0;
      for (let step = 0; step < 300; step += 1) {
        now += Math.floor(random() * 300);
        const roll = random();
        const before = state;
        if (roll < 0.5) {
          state = admit(state, now, `p${ids++}`, o).state;
        } else if (roll < 0.85) {
          const out = Object.keys(state.probes);
          const id = out[Math.floor(random() * out.length)];
          if (id !== undefined) state = onProbeResult(state, id, random() < 0.5, now, o).state;
        } else if (roll < 0.98) {
          const total = Math.floor(random() * 20);
          const failures = Math.floor(random() * (total + 1));
          state = onWindow(state, stats(total, failures, failures), now, o).state;
        } else {
          state = forceClose(state).state;
        }
        if (state.phase === 'half-open') {
          const live = Object.values(state.probes).filter((until) => until > now).length;
          expect(live + state.probeSuccesses).toBeLessThanOrEqual(o.halfOpenProbes);
        }
        if (state.phase === 'open' && state !== before) {
          expect(state.halfOpenAt! - state.openedAt!).toBeLessThanOrEqual(o.maxOpenMs);
          expect(state.halfOpenAt! - state.openedAt!).toBeCloseTo(openDuration(state.trips, o), 2);
        }
        if (state.phase === 'closed') expect(state.probes).toEqual({});
      }
    }
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
