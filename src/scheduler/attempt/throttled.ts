/** What a 429 does to its key, beyond its own job's wait (`src/policy/limit/throttle.ts` decides). */
import { reactToThrottle } from '../../policy/limit/throttle.js';
import type { Admitted } from './admit.js';
import type { AttemptContext } from './context.js';

/**
 * Until when a 429 pauses the attempt's whole key, or undefined when it
 * holds back only its own job (which waits its `Retry-After` as any retry
 * does). With a fleet-wide limit (`adaptiveConcurrency`) the attempt's lease
 * goes back now as `throttled` — the limit is cut and recovers gradually —
 * and the key is paused only when it keeps answering 429 (`reactToThrottle`).
 * Without one nothing else would slow the key down, so a 429 with a
 * `Retry-After` pauses it, as does any 429 whose lease could not be given
 * back (Redis failed).
 */
export async function throttledUntil<T>(
  ctx: AttemptContext<T>,
  a: Admitted<T>,
  retryAfterMs: number | undefined,
  now: number,
): Promise<number | undefined> {
  const lease = a.lease;
  const fallback = retryAfterMs === undefined ? undefined : now + retryAfterMs;
  if (lease === undefined || ctx.limits === undefined) return fallback;
  // Given back here, with what it showed: the attempt's `finally` must not give it back again.
  a.lease = undefined;
  const throttles = await ctx.limits.throttled(lease);
  if (throttles === undefined) return fallback;
  const reaction = reactToThrottle({ throttles, retryAfterMs, now }, ctx.limits.params);
  if (reaction.action === 'slow-down') return undefined;
  ctx.logger.debug(
    { key: a.key, throttles, retryAfterMs, because: reaction.because },
    'key answered 429 again; paused whole',
  );
  return reaction.until;
}
