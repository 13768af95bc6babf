import { rateReserve } from './lua-commands-webhook.js';
import type { RedisClient } from './connection.js';
import { requeueKeys } from './keys.js';

/** A rate limit: deliveries per second and the burst after a quiet spell. */
export interface RateLimit {
  perSecond: number;
  burst: number;
}

/**
 * Per-key rate limits held fleet-wide: one string per key, its next slot
 * (GCRA; `lua/rateReserve-1.lua`), expiring once the key is quiet. Every
 * worker reserves through the same key, so N workers together keep to the
 * limit.
 */
export class RateStore {
  private readonly keys;

  constructor(
    private readonly redis: RedisClient,
    queue: string,
    prefix = 'requeue',
  ) {
    this.keys = requeueKeys(queue, prefix);
  }

  /** Reserves `key`'s next slot: its time in ms; at or before `now` means "go now". */
  reserve(key: string, limit: RateLimit, now: number): Promise<number> {
    return rateReserve(this.redis, this.keys.rate(key), [
      Math.round(now),
      Math.max(1, Math.round(1_000 / limit.perSecond)),
      limit.burst,
    ]);
  }
}
