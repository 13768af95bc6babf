import type { LimitSignal } from './aimd.js';
import type { ConcurrencyLimitOptions } from './gradient-options.js';

/** A gradient limiter's state: the limit, the no-load latency, the window being filled. */
export interface GradientState {
  /** Fractional: `Math.floor(limit)` attempts may run at once. */
  readonly limit: number;
  /** The lowest window mean seen (ms), rising by at most ×2 per `relearnMs`; Infinity before the first. */
  readonly baselineMs: number;
  /** When the baseline was last lowered or checked (ms). */
  readonly baselineAt: number;
  readonly samples: number;
  readonly sumMs: number;
  /** The window's successes and their latency: only a success tells the no-load latency. */
  readonly successes: number;
  readonly successSumMs: number;
  /** The most attempts in flight seen in the window. */
  readonly maxInFlight: number;
}

/** One finished attempt, as the limit learns from it. */
export interface GradientSample {
  readonly signal: LimitSignal;
  readonly latencyMs: number;
  /** Attempts in flight when it finished (itself included). */
  readonly inFlight: number;
  readonly now: number;
}

type Options = Pick<
  ConcurrencyLimitOptions,
  'floor' | 'initial' | 'tolerance' | 'latencyFloorMs' | 'relearnMs'
>;

/** A window closes after this many samples at least, and at least the limit's worth. */
export const minWindowSamples = 3;
/** How far one window may lower the limit toward what its gradient asks: smoothing against noise. */
export const decreaseSmoothing = 0.5;

/** The state of a worker that has seen nothing yet, its limit at `initial` within [floor, ceiling]. */
export function initialGradient(o: Options, ceiling: number): GradientState {
  const limit = clamp(o.initial, o.floor, Math.max(o.floor, ceiling));
  return {
    limit,
    baselineMs: Infinity,
    baselineAt: 0,
    samples: 0,
    sumMs: 0,
    successes: 0,
    successSumMs: 0,
    maxInFlight: 0,
  };
}

/** A {@link GradientState} its owner updates in place ({@link stepGradient}). */
export type MutableGradientState = { -readonly [K in keyof GradientState]: GradientState[K] };

/**
 * Netflix concurrency-limits' gradient rule, per window of about one round
 * trip (`max(3, limit)` samples): with `short` the window's mean latency and
 * `baseline` the lowest window mean seen, the gradient is
 * `clamp(tolerance × baseline / short, 0.5, 1)` and the new limit
 * `limit × gradient + √limit`. At gradient 1 the limit grows by √limit per
 * round trip (only while at least half of it is in use, so an idle worker
 * does not climb to a limit it never tried, or while every answer is under
 * `latencyFloorMs`: nothing to protect); below, it falls halfway to the
 * new value, so a steady overload settles where latency is about
 * `tolerance / (1 − 1/√limit)` × the no-load latency: past the server's
 * knee, not far past. A retryable failure, a timeout or a 429 counts as a
 * sample at least `2 × tolerance` × the baseline (overload, however fast it
 * failed; `2 × tolerance × latencyFloorMs` before any success), and a
 * neutral outcome (a permanent error, a deferral) is not counted. The
 * baseline is learnt from successes only: a failure that came back at once
 * says nothing of how fast the dependency answers when it works, and taking
 * it as the no-load latency would hold the limit down long after the
 * dependency recovered (the retry-lateness bench: 500 instant 503s, then
 * 20 ms successes stuck at a limit of 4–8 for half a second). The baseline
 * may rise, so a dependency that became slower for good is learnt again: at
 * most ×2 per `relearnMs`. Every limit lies in
 * [`floor`, `ceiling`]. A new state; the rule itself is {@link stepGradient}.
 * @see https://github.com/Netflix/concurrency-limits (GradientLimit, Gradient2Limit)
 */
export function nextGradient(
  state: GradientState,
  sample: GradientSample,
  o: Options,
  ceiling: number,
): GradientState {
  if (sample.signal === 'neutral') return state;
  const next: MutableGradientState = { ...state };
  stepGradient(next, sample.signal, sample.latencyMs, sample.inFlight, sample.now, o, ceiling);
  return next;
}

/**
 * {@link nextGradient}'s rule applied to `state` in place, the sample given
 * field by field: what a worker runs once per attempt, allocating nothing.
 */
export function stepGradient(
  state: MutableGradientState,
  signal: LimitSignal,
  sampleMs: number,
  inFlight: number,
  now: number,
  o: Options,
  ceiling: number,
): void {
  if (signal === 'neutral') return;
  const floorMs = Math.max(1, o.latencyFloorMs);
  let latencyMs = Math.max(sampleMs, floorMs);
  if (signal === 'success') {
    state.successes += 1;
    state.successSumMs += latencyMs;
  } else latencyMs = Math.max(latencyMs, 2 * o.tolerance * referenceMs(state.baselineMs, floorMs));
  const samples = state.samples + 1;
  const sumMs = state.sumMs + latencyMs;
  if (inFlight > state.maxInFlight) state.maxInFlight = inFlight;
  if (samples < Math.max(minWindowSamples, Math.floor(state.limit))) {
    state.samples = samples;
    state.sumMs = sumMs;
    return;
  }

  const shortMs = sumMs / samples;
  let baselineMs = state.baselineMs;
  if (state.successes > 0) {
    const elapsed = Math.max(0, now - state.baselineAt);
    const risen = state.baselineMs * 2 ** (elapsed / o.relearnMs);
    baselineMs = Math.min(state.successSumMs / state.successes, risen);
    state.baselineAt = now;
  }
  const gradient = clamp((o.tolerance * referenceMs(baselineMs, floorMs)) / shortMs, 0.5, 1);
  const target = state.limit * gradient + Math.sqrt(state.limit);
  let limit = state.limit;
  if (target < limit) limit += decreaseSmoothing * (target - limit);
  // Grows while in use, or while nothing is measurably slow: a handler of a few
  // ms is seen in flight only briefly (its job spends longer in Redis's moves).
  else if (state.maxInFlight * 2 >= limit || shortMs <= floorMs) limit = target;
  state.limit = clamp(limit, o.floor, Math.max(o.floor, ceiling));
  state.baselineMs = baselineMs;
  state.samples = 0;
  state.sumMs = 0;
  state.successes = 0;
  state.successSumMs = 0;
  state.maxInFlight = 0;
}

/** The latency a window is judged against: the baseline, or `latencyFloorMs` before the first success. */
function referenceMs(baselineMs: number, floorMs: number): number {
  return Number.isFinite(baselineMs) ? Math.max(baselineMs, floorMs) : floorMs;
}

function clamp(x: number, low: number, high: number): number {
  return Math.min(high, Math.max(low, x));
}
