import { expect } from 'vitest';
import {
  parseBreakerOptions,
  type BreakerOptions,
  type BreakerOptionsInput,
} from '../../src/policy/breaker/breaker-options.js';
import {
  admit,
  closedState,
  onWindow,
  type BreakerState,
  type WindowStats,
} from '../../src/policy/breaker/breaker.js';

/**
 * The breaker state machine's test fixtures: options parsed with the defaults,
 * window stats, and circuits tripped or half-open at the reference time T0.
 */

/** The reference time of these tests: when the window first calls for a trip. */
export const T0 = Date.UTC(2025, 0, 1, 12, 0, 0);

export function options(input: BreakerOptionsInput = {}): BreakerOptions {
  return parseBreakerOptions(input);
}

export function stats(total: number, failures: number, consecutiveFailures = 0): WindowStats {
  return { total, failures, consecutiveFailures };
}

export type OpenState = Extract<BreakerState, { phase: 'open' }>;

/** `state`, which must be open (with its half-open time). */
export function asOpen(state: BreakerState): OpenState {
  if (state.phase !== 'open') throw new Error(`expected an open circuit, not ${state.phase}`);
  return state;
}

/** A circuit tripped at `at` by a window of failures only. */
export function tripped(o: BreakerOptions, at = T0): OpenState {
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
export function halfOpen(o: BreakerOptions, first = 'p0'): BreakerState {
  const open = tripped(o);
  const step = admit(open, open.halfOpenAt, first, o);
  expect(step.transition).toBe('half-open');
  expect(step.verdict).toEqual({ kind: 'probe', probeId: first });
  return step.state;
}
