import type { AdaptiveConcurrency } from './limit-options.js';
import { recoveredLimit } from './recovery.js';

/**
 * What an attempt said about its key's dependency: it succeeded; it showed
 * overload (a timeout, a retryable failure, a success slower than the
 * target); it was throttled (a 429); it failed while its key was paused
 * whole; or it says nothing (a permanent 4xx, a deferral).
 */
export type LimitSignal = 'success' | 'overload' | 'throttled' | 'pause' | 'neutral';

/** A key's learned limit. Stored in Redis as `l`, `t`, `d`, `m`, `r` (`limitRelease-3.lua`). */
export interface LimitState {
  /** The limit, fractional: `Math.floor(limit)` attempts may run at once. */
  readonly limit: number;
  /** Below it the limit grows by one per success (slow start), above it by `additiveIncrease / limit`. */
  readonly threshold: number;
  /** When the limit last went down (ms): an attempt started before it cannot lower it again. */
  readonly decreasedAt: number;
  /** The limit a 429 cut, while the limit recovers towards it (`recoveredLimit`); 0 otherwise. */
  readonly peak: number;
  /** 429s the key answered in a row, fleet-wide, with no success between (`reactToThrottle`). */
  readonly throttles: number;
}

/** One finished attempt, as the limit learns from it. */
export interface LimitSample {
  readonly signal: LimitSignal;
  readonly latencyMs: number;
  /** Attempts of the key in flight while this one ran (itself included). */
  readonly inFlight: number;
  /** When the attempt took its place under the limit (ms). */
  readonly startedAt: number;
  readonly now: number;
}

export type Bounds = Pick<
  AdaptiveConcurrency,
  | 'floor'
  | 'ceiling'
  | 'initial'
  | 'latencyTargetMs'
  | 'additiveIncrease'
  | 'backoffRatio'
  | 'recoveryMs'
>;

/** The state of a key with none stored. */
export function initialLimitState(o: Bounds): LimitState {
  return { limit: o.initial, threshold: o.initial, decreasedAt: 0, peak: 0, throttles: 0 };
}

/**
 * AIMD with TCP's refinements, per key and shared by the fleet:
 * - a success within `latencyTargetMs` adds one (below the threshold: slow
 *   start) or `additiveIncrease / limit` (about `additiveIncrease` per round
 *   trip), but only while the key uses at least half its limit, so an idle
 *   key does not climb to a limit it never tried (Netflix's AIMDLimit);
 * - overload multiplies the limit by `backoffRatio`, once per round trip: an
 *   attempt that started before the last decrease ran under the old limit
 *   and is not counted, failed or not (TCP NewReno's recovery), so a burst
 *   of failures in flight does not collapse the limit to the floor, and the
 *   successes beside them do not undo the decrease;
 * - a 429 (`throttled`) multiplies the limit by `backoffRatio` too, once per
 *   round trip, and the limit then comes back to where it was along CUBIC's
 *   curve, by the clock, in `recoveryMs` (`recoveredLimit`), however short
 *   the round trips — gradually, not all at once, as the AWS SDKs' adaptive
 *   mode does for a rate — then grows additively again; every 429 counts in
 *   `throttles`, every success resets it;
 * - a failure while the key is paused whole (`pause`) restarts at `floor`
 *   with the threshold at `backoffRatio` × the old limit: the key recovers
 *   by slow start, doubling per round trip, then linearly.
 * Every result lies in [`floor`, `ceiling`].
 * @see https://github.com/Netflix/concurrency-limits (AIMDLimit)
 * @see RFC 5681 (slow start, congestion avoidance), RFC 6582 (one decrease per window)
 */
export function nextLimit(state: LimitState, sample: LimitSample, o: Bounds): LimitState {
  let { limit, threshold, decreasedAt, peak, throttles } = state;
  let signal = sample.signal;
  // The streak counts every answer, whatever limit it ran under.
  if (signal === 'throttled') throttles += 1;
  else if (signal === 'success') throttles = 0;
  if (signal === 'success' && sample.latencyMs > o.latencyTargetMs) signal = 'overload';
  // An attempt started before the last decrease ran under the old limit: it
  // says nothing about the new one, whether it failed or succeeded.
  if (sample.startedAt < decreasedAt) signal = 'neutral';
  if (signal === 'success') {
    if (sample.inFlight * 2 >= limit) {
      if (peak > 0) {
        // Recovering from a 429: by the clock, whatever the round trip.
        const elapsedMs = sample.now - decreasedAt;
        limit = Math.max(limit, recoveredLimit(peak, elapsedMs, o));
        if (elapsedMs >= o.recoveryMs) peak = 0;
      } else limit = limit < threshold ? limit + 1 : limit + o.additiveIncrease / limit;
    }
  } else if (signal === 'overload' || signal === 'throttled') {
    peak = signal === 'throttled' ? limit : 0;
    limit = limit * o.backoffRatio;
    threshold = limit;
    decreasedAt = sample.now;
  } else if (signal === 'pause') {
    threshold = limit * o.backoffRatio;
    limit = o.floor;
    peak = 0;
    decreasedAt = sample.now;
  }
  return {
    limit: clamp(limit, o.floor, o.ceiling),
    threshold: clamp(threshold, o.floor, o.ceiling),
    decreasedAt,
    peak,
    throttles,
  };
}

/** How many attempts a limit admits at once. */
export function admits(limit: number, o: Pick<Bounds, 'floor' | 'ceiling'>): number {
  return Math.floor(clamp(limit, o.floor, o.ceiling));
}

function clamp(x: number, low: number, high: number): number {
  return Math.min(high, Math.max(low, x));
}
