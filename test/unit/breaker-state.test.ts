import { describe, expect, it } from 'vitest';
import { parseBreakerOptions } from '../../src/policy/breaker/breaker-options.js';
import {
  admit,
  closedState,
  forceOpen,
  onWindow,
  type BreakerState,
} from '../../src/policy/breaker/breaker.js';
import {
  parseBreakerState,
  toBreakerState,
  toStoredBreakerState,
} from '../../src/policy/breaker/breaker-state.js';

/** The reference time of these tests: when the circuit trips. */
const T0 = Date.UTC(2025, 0, 1, 12, 0, 0);

describe('the stored breaker state', () => {
  const o = parseBreakerOptions({ minimumRequests: 1, halfOpenProbes: 2 });
  const open = onWindow(
    closedState(),
    { total: 1, failures: 1, consecutiveFailures: 1 },
    T0,
    o,
  ).state;
  const half = admit(open, T0 + o.openMs, 'p1', o).state;
  const isolated = forceOpen(open, T0 + 5).state;

  it.each([
    ['closed', closedState()],
    ['open', open],
    ['half-open with a probe', half],
    ['isolated', isolated],
  ])('reads back every state the machine makes (%s)', (_, state: BreakerState) => {
    expect(parseBreakerState(JSON.stringify(state))).toEqual(state);
  });

  it('reads what earlier versions wrote: missing fields take a new breaker’s values', () => {
    expect(parseBreakerState('{"phase":"open","openedAt":5,"halfOpenAt":9}')).toEqual({
      phase: 'open',
      openedAt: 5,
      halfOpenAt: 9,
      trips: 0,
      probes: {},
      probeSuccesses: 0,
    });
  });

  it('reads an isolated circuit as earlier versions wrote it (open, isolated, no half-open time)', () => {
    const isolatedAsBefore = {
      phase: 'isolated',
      openedAt: 5,
      trips: 2,
      probes: {},
      probeSuccesses: 0,
    };
    expect(parseBreakerState('{"phase":"open","openedAt":5,"trips":2,"isolated":true}')).toEqual(
      isolatedAsBefore,
    );
    // An open circuit without a half-open time could only be isolated.
    expect(parseBreakerState('{"phase":"open","openedAt":5,"trips":2}')).toEqual(isolatedAsBefore);
  });

  it('stores and publishes an isolated circuit as earlier versions wrote it, and reads it back', () => {
    const stored = toStoredBreakerState(isolated);
    expect(stored).toEqual({ ...isolated, phase: 'open', isolated: true });
    expect(stored).not.toHaveProperty('halfOpenAt');
    expect(toBreakerState(JSON.parse(JSON.stringify(stored)))).toEqual(isolated);
    for (const state of [closedState(), open, half])
      expect(toStoredBreakerState(state)).toBe(state);
  });

  it('keeps only the fields of the phase', () => {
    expect(parseBreakerState('{"phase":"closed","isolated":true,"openedAt":1,"x":2}')).toEqual(
      closedState(),
    );
  });

  it('nothing stored, or something unreadable, is a new closed breaker', () => {
    for (const raw of [
      null,
      undefined,
      '',
      'not json',
      '{"phase":"ajar"}',
      '{"phase":"open","trips":-1}',
    ])
      expect(parseBreakerState(raw)).toEqual(closedState());
  });

  it('a published state that is not one is refused, not taken as closed', () => {
    expect(toBreakerState({ phase: 'open', probes: { p: 'soon' } })).toBeUndefined();
    expect(toBreakerState(half)).toEqual(half);
  });
});
