import type { RedisClient } from './connection.js';
import { requeueKeys } from './keys.js';
import * as lua from './lua-commands.js';

/** A pause as published to every worker. */
export interface PauseMessage {
  key: string;
  /** Jobs of the key wait until this time (ms since epoch). */
  until: number;
}

/**
 * Keys paused fleet-wide until a time: what an endpoint's 429 (or a 503 with
 * `Retry-After`) asks for, or what a handler asks for with `job.pauseKey()`.
 * Stored in one hash per queue, changed by one script that publishes.
 */
export class PauseStore {
  private readonly keys;

  constructor(
    private readonly redis: RedisClient,
    readonly queue: string,
  ) {
    this.keys = requeueKeys(queue);
  }

  get channel(): string {
    return this.keys.pauseChannel;
  }

  /** Pauses `key` until `until` (a later pause already there wins). */
  async pause(key: string, until: number, now: number): Promise<boolean> {
    const changed = await lua.pauseKey(this.redis, this.keys.pausedKeys, [
      key,
      Math.round(until),
      Math.round(now),
      this.keys.pauseChannel,
    ]);
    return changed === 1;
  }

  /** Every stored pause (expired ones included: a read never prunes). */
  async list(): Promise<PauseMessage[]> {
    const fields = await this.redis.hgetall(this.keys.pausedKeys);
    return Object.entries(fields)
      .map(([key, until]) => ({ key, until: Number(until) }))
      .filter((p) => Number.isFinite(p.until));
  }
}
