import type { AdaptiveConcurrency } from './limit-options.js';

/** How long a key that keeps answering 429 without a `Retry-After` is paused, in ms. */
export const throttlePauseMs = 1_000;

/** What a 429 does beyond holding back its own job (which waits its `Retry-After`). */
export type ThrottleReaction =
  /** Only the key's limit is cut (`nextLimit`'s `throttled`): its other jobs keep going. */
  | { action: 'slow-down' }
  /** The whole key waits, on every worker, until `until` (ms). */
  | { action: 'pause'; until: number; because: 'streak' | 'long-retry-after' };

/**
 * The reaction to a 429 from a key whose fleet-wide limit is learned. One
 * 429 says "not this one, not now": the job waits its `Retry-After` and the
 * limit is cut, so the key's rate comes down and then back gradually. The key
 * is paused whole only when it keeps answering 429:
 * - `throttles` (429s in a row, fleet-wide, no success between, this one
 *   included) reached `pauseAfter429s`: a receiver that refuses everything
 *   beyond its rate is left alone until its `Retry-After`, so it sees about
 *   its rate plus `pauseAfter429s` requests per window, not a hammering;
 * - or the `Retry-After` is at least `pauseRetryAfterMs`: a receiver asking
 *   for that long is asking everyone to stay away.
 * The pause lasts the `Retry-After`, or {@link throttlePauseMs} without one.
 * Pure: `now` is given.
 */
export function reactToThrottle(
  answer: {
    readonly throttles: number;
    readonly retryAfterMs: number | undefined;
    readonly now: number;
  },
  o: Pick<AdaptiveConcurrency, 'pauseAfter429s' | 'pauseRetryAfterMs'>,
): ThrottleReaction {
  const until = answer.now + (answer.retryAfterMs ?? throttlePauseMs);
  if (answer.retryAfterMs !== undefined && answer.retryAfterMs >= o.pauseRetryAfterMs)
    return { action: 'pause', until, because: 'long-retry-after' };
  if (answer.throttles >= o.pauseAfter429s) return { action: 'pause', until, because: 'streak' };
  return { action: 'slow-down' };
}
