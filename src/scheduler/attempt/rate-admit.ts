/**
 * Admission under a key's rate limit (`rateLimit`): the attempt reserves
 * the key's next slot fleet-wide and, when that slot is later, is deferred
 * to it — no attempt used. Back at its slot it runs without asking again:
 * the slot was reserved for it, so a backlog is spread over time once
 * instead of polling. A slot lost to a later deferral (a full bulkhead) is
 * never given twice: the limit is undershot, never exceeded.
 */
import type { Attempt, AttemptContext } from './context.js';
import { deferAttempt, type Admitted } from './admit.js';

/** The deferral to the key's next slot, or `undefined` when the attempt may run now. */
export async function holdForRate<T>(
  ctx: AttemptContext<T>,
  a: Admitted<T>,
  key: string,
): Promise<Attempt | undefined> {
  const last = a.state.history.at(-1);
  if (
    last?.outcome === 'deferred' &&
    (last.replay ?? 0) === a.life &&
    last.details?.reason === 'rate-limit'
  )
    return undefined;
  const slot = await ctx.rateSlot!(a.handle, key, a.now);
  if (slot === undefined || slot <= a.now) return undefined;
  return deferAttempt(ctx, a, key, slot, 'rate-limit');
}
