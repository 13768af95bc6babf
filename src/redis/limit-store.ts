import type { AdaptiveConcurrency } from '../policy/limit/limit-options.js';
import type { LimitSignal, LimitState } from '../policy/limit/aimd.js';
import type { RedisClient } from './connection.js';
import { requeueKeys } from './keys.js';
import * as lua from './lua-commands.js';
import { redisTimeMs } from './window-scripts.js';

/** The options a store's scripts take, the lease's length resolved. */
export type LimitParams = Omit<AdaptiveConcurrency, 'leaseMs'> & { leaseMs: number };

/** What `acquire` answers. */
export interface Acquired {
  admitted: boolean;
  /** The key's attempts in flight, this one included when admitted. */
  inFlight: number;
  limit: number;
  /** Redis's time of the acquire (ms): the lease's start. */
  now: number;
}

/** One key as the CLI, the admin API and the metrics show it. */
export interface KeyLimitView {
  key: string;
  /**
   * The learned limit (fractional; attempts admitted at once are its floor),
   * or null when the key has leases but no stored limit (it runs at `initial`).
   */
  limit: number | null;
  /** Slow-start threshold, or null as for `limit`. */
  threshold: number | null;
  /** Leases not yet expired. */
  inFlight: number;
  /** When the limit last went down (ms since epoch), 0 if never. */
  decreasedAt: number;
}

/**
 * The fleet's adaptive concurrency limits, per key, in Redis. Per key: a
 * hash of five fields (the learned limit, its threshold, its last decrease,
 * the limit a 429 cut while it recovers, the key's 429s in a row) and a
 * sorted set of leases (token → expiry, so a crashed worker's places
 * come back by themselves); a queue-wide sorted set indexes the keys that
 * have either. `acquire` and `release` are one script each. A key whose
 * leases are all back, whose limit is at `initial` or above and whose last
 * answer was not a 429 has no state at all. Measured (`MEMORY USAGE`, Redis 7, a 19-character key): the hash
 * 136 bytes with three fields (at most 16 more with five), the lease set 152
 * bytes plus 34 per lease, and one index member.
 */
export class LimitStore {
  private readonly keys;

  constructor(
    private readonly redis: RedisClient,
    readonly queue: string,
  ) {
    this.keys = requeueKeys(queue);
  }

  private keysOf(key: string): [string, string, string] {
    return [this.keys.limitKeys, this.keys.limit(key), this.keys.limitLeases(key)];
  }

  /** Takes a place under `key`'s limit if the fleet has one free. `atMs` replaces Redis's clock (tests). */
  async acquire(key: string, token: string, p: LimitParams, atMs?: number): Promise<Acquired> {
    const [admitted, inFlight, limit, now] = await lua.limitAcquire(this.redis, this.keysOf(key), [
      key,
      token,
      p.floor,
      p.ceiling,
      p.initial,
      p.leaseMs,
      p.idleMs,
      atMs ?? '',
    ]);
    return { admitted: admitted === 1, inFlight, limit, now };
  }

  /** Gives back a place and updates the limit from the attempt's signal (`nextLimit`). */
  async release(
    key: string,
    token: string,
    sample: { signal: LimitSignal; latencyMs: number; startedAt: number },
    p: LimitParams,
    atMs?: number,
  ): Promise<LimitState & { inFlight: number }> {
    const [limit, threshold, decreasedAt, inFlight, peak, throttles] = await lua.limitRelease(
      this.redis,
      this.keysOf(key),
      [
        key,
        token,
        sample.signal,
        Math.round(sample.latencyMs),
        sample.startedAt,
        p.floor,
        p.ceiling,
        p.initial,
        p.additiveIncrease,
        p.backoffRatio,
        p.latencyTargetMs,
        p.idleMs,
        atMs ?? '',
        p.recoveryMs,
      ],
    );
    return { limit, threshold, decreasedAt, inFlight, peak, throttles };
  }

  /** How many keys have state (the index's size; reads only). */
  async count(): Promise<number> {
    return this.redis.zcard(this.keys.limitKeys);
  }

  /**
   * The keys with state, at most `max` (those touched last first), each with
   * its limit and unexpired leases. Reads only: expired leases are not
   * counted, never removed.
   */
  async list(max = 100): Promise<KeyLimitView[]> {
    const [time, keys] = await Promise.all([
      this.redis.time(),
      this.redis.zrevrange(this.keys.limitKeys, 0, Math.max(0, max - 1)),
    ]);
    if (keys.length === 0) return [];
    const now = redisTimeMs([String(time[0]), String(time[1])]);
    const pipeline = this.redis.pipeline();
    for (const key of keys) {
      pipeline.hmget(this.keys.limit(key), 'l', 't', 'd');
      pipeline.zcount(this.keys.limitLeases(key), `(${now}`, '+inf');
    }
    const replies = (await pipeline.exec()) ?? [];
    const views: KeyLimitView[] = [];
    keys.forEach((key, i) => {
      const [stateErr, state] = replies[2 * i] ?? [];
      const [countErr, inFlight] = replies[2 * i + 1] ?? [];
      if (stateErr || countErr) throw stateErr ?? countErr;
      const [l, t, d] = (state as (string | null)[] | undefined) ?? [];
      views.push({
        key,
        limit: l == null ? null : Number(l),
        threshold: t == null ? null : Number(t),
        inFlight: Number(inFlight ?? 0),
        decreasedAt: d == null ? 0 : Number(d),
      });
    });
    return views;
  }
}
