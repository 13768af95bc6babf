/**
 * An additive-increase / multiplicative-decrease concurrency limit for one
 * key, pure: the simulator's stand-in for the fleet's adaptive per-key limit
 * (issue 22, item 4). It is self-contained here on purpose: the workers'
 * own limiter (src/policy/limit/) is being written on another branch; when
 * it lands, the simulator should call it instead, as it calls the workers'
 * breaker and budget.
 *
 * The rule is Netflix concurrency-limits' `AIMDLimit` with TCP Reno's
 * halving: a success grows the limit by one when the limit is in use
 * (at least half of it in flight), a failure (a timeout) halves it, and a
 * success slower than `slowFactor` × the fastest answer seen shrinks it by
 * `slowDecrease`; always within [`floor`, `ceiling`].
 */
export interface AimdOptions {
  /** The limit to start from. @defaultValue `20` */
  initial: number;
  /** Never below (a down key still gets this many attempts in flight). @defaultValue `1` */
  floor: number;
  /** Never above. @defaultValue `200` */
  ceiling: number;
  /** Factor applied on a failure. @defaultValue `0.5` */
  failureDecrease: number;
  /** A success this many times slower than the fastest seen counts as a sign of overload. @defaultValue `2` */
  slowFactor: number;
  /** Factor applied on such a slow success. @defaultValue `0.9` */
  slowDecrease: number;
}

/** The defaults above. */
export const aimdDefaults: Readonly<AimdOptions> = Object.freeze({
  initial: 20,
  floor: 1,
  ceiling: 200,
  failureDecrease: 0.5,
  slowFactor: 2,
  slowDecrease: 0.9,
});

/** The limit and the fastest answer seen (Infinity before the first). */
export interface AimdState {
  limit: number;
  fastestMs: number;
}

export function aimdStart(options: AimdOptions): AimdState {
  return { limit: options.initial, fastestMs: Infinity };
}

/** The attempts allowed in flight: the limit, rounded down. */
export function aimdSlots(state: AimdState): number {
  return Math.floor(state.limit);
}

/** After a success that took `latencyMs` with `inFlight` attempts (itself included) in flight. */
export function aimdOnSuccess(
  state: AimdState,
  latencyMs: number,
  inFlight: number,
  options: AimdOptions,
): AimdState {
  const fastestMs = Math.min(state.fastestMs, latencyMs);
  let limit = state.limit;
  if (latencyMs > options.slowFactor * fastestMs) limit *= options.slowDecrease;
  else if (2 * inFlight >= limit) limit += 1;
  return { limit: clamp(limit, options), fastestMs };
}

/** After a failure (a timeout, a refused connection). */
export function aimdOnFailure(state: AimdState, options: AimdOptions): AimdState {
  return {
    limit: clamp(state.limit * options.failureDecrease, options),
    fastestMs: state.fastestMs,
  };
}

function clamp(limit: number, { floor, ceiling }: AimdOptions): number {
  return Math.min(ceiling, Math.max(floor, limit));
}
