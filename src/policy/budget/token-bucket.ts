/**
 * The token-bucket retry budget as a pure state machine: the spec that
 * `src/redis/lua/budgetTake-1.lua` and `budgetRefund-1.lua` implement in
 * Redis for the whole fleet (a model test runs both side by side).
 * @see the AWS SDK's standard retry mode ("retry quota")
 */

/** A bucket's stored state. A bucket never written is full. */
export interface TokenBucketState {
  readonly tokens: number;
  /** Retries refused since the bucket was made (or last reset). */
  readonly denied: number;
}

/** The result of asking for tokens. */
export interface TokenTake {
  readonly state: TokenBucketState;
  readonly granted: boolean;
}

/** A full bucket: what a bucket that Redis does not hold means. */
export function fullBucket(capacity: number): TokenBucketState {
  return { tokens: capacity, denied: 0 };
}

/** Takes `cost` tokens if there are that many; otherwise counts a denial. */
export function takeTokens(state: TokenBucketState, cost: number): TokenTake {
  if (state.tokens >= cost)
    return { state: { ...state, tokens: state.tokens - cost }, granted: true };
  return { state: { ...state, denied: state.denied + 1 }, granted: false };
}

/**
 * Gives `amount` tokens back, never above `capacity` (a bucket left fuller
 * by a larger former capacity is brought down to this one).
 */
export function refundTokens(
  state: TokenBucketState,
  amount: number,
  capacity: number,
): TokenBucketState {
  return { ...state, tokens: Math.min(capacity, state.tokens + amount) };
}
