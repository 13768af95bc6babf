import { describe, expect, it } from 'vitest';
import {
  admit,
  closedState,
  forceClose,
  forceOpen,
  onProbeResult,
  onWindow,
  openDuration,
} from '../../src/policy/breaker/breaker.js';
import { seededRandom } from '../../src/util/random.js';
import { T0, options, stats, asOpen, tripped, halfOpen } from './breaker-helpers.js';

/**
 * How long a circuit stays open, opened and closed by hand, and the bounds that
 * hold over random histories (the transitions are in `breaker.test.ts`).
 */

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
