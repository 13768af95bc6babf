import type { RedisClient } from '../redis/connection.js';
import type { Logger } from '../config/logger.js';
import { followChannel, type Follower } from '../redis/follow-channel.js';
import { PauseStore, type PauseMessage } from '../redis/pause-store.js';
import type { Clock } from '../util/system.js';
import type { JobMoves } from './bullmq/job-moves.js';
import { KeyParking } from './bullmq/key-parking.js';

/**
 * What keeps one key (a webhook endpoint, a tenant) from slowing the others,
 * besides its breaker:
 * - a bulkhead: at most a bounded number of a key's jobs run at once in this
 *   process, so a hanging key holds only its share of the slots;
 * - pauses: a key paused until a time (a `Retry-After`) holds back
 *   its jobs on every worker. Pauses are kept in Redis and cached here, kept
 *   current by pub/sub (and a reload every few seconds), so checking costs no
 *   round trip;
 * - parking: a dispatch-keyed job fetched while its key is full waits parked
 *   until an attempt of that key frees its slot (`bullmq/key-parking.ts`).
 */
export class KeyGate {
  readonly pauses: PauseStore;
  private readonly running = new Map<string, number>();
  /** Each running key's bulkhead, as last entered. */
  private readonly caps = new Map<string, number>();
  private readonly paused = new Map<string, number>();
  private follower: Follower | undefined;
  /** Where a full key's jobs wait for its slots, once {@link parkWith} gave the moves. */
  parking: KeyParking | undefined;

  constructor(
    private readonly options: { redis: RedisClient; queue: string; clock: Clock; logger: Logger },
  ) {
    this.pauses = new PauseStore(options.redis, options.queue);
  }

  /** Parks full keys' jobs with `moves` (BullMQ's keys under `bullPrefix`). */
  parkWith(moves: JobMoves, bullPrefix: string): void {
    const { redis, queue, clock, logger } = this.options;
    this.parking = new KeyParking({ redis, queue, bullPrefix, moves, clock, logger });
  }

  /** Subscribes to pauses and loads the current ones. */
  async start(): Promise<void> {
    this.follower = await followChannel({
      redis: this.options.redis,
      channel: this.pauses.channel,
      what: 'pause',
      logger: this.options.logger,
      reload: () => this.reload(),
      onMessage: (raw) => {
        const message = raw as PauseMessage;
        if (typeof message.key !== 'string' || !Number.isFinite(message.until))
          throw new Error('not a pause message');
        this.apply(message);
      },
    });
  }

  /** Until when `key` is paused, if it is now. */
  pausedUntil(key: string): number | undefined {
    const until = this.paused.get(key);
    if (until === undefined) return undefined;
    if (until > this.options.clock.now()) return until;
    this.paused.delete(key);
    return undefined;
  }

  /** Pauses `key` until `until`, here at once and on every worker through Redis. */
  async pause(key: string, until: number): Promise<void> {
    this.apply({ key, until });
    await this.pauses.pause(key, until, this.options.clock.now());
  }

  /** Takes a slot of `key`'s bulkhead; false when `limit` of its jobs run already. */
  enter(key: string, limit: number): boolean {
    const running = this.running.get(key) ?? 0;
    if (running >= limit) return false;
    this.running.set(key, running + 1);
    this.caps.set(key, limit);
    return true;
  }

  /** How many of `key`'s jobs hold a slot of its bulkhead here. */
  runningOf(key: string): number {
    return this.running.get(key) ?? 0;
  }

  /**
   * Gives back a slot taken by {@link enter}; when the attempt `ran` (its
   * handler was called), one of the key's parked jobs takes the slot, and a
   * second one while the bulkhead has more room than that slot (the key was
   * held by its fleet-wide limit, which may have grown: that job finds out,
   * and is parked again if not).
   */
  leave(key: string, ran = false): void {
    const running = (this.running.get(key) ?? 1) - 1;
    const room = (this.caps.get(key) ?? 1) - running;
    if (running <= 0) {
      this.running.delete(key);
      this.caps.delete(key);
    } else this.running.set(key, running);
    if (ran) this.parking?.freed(key, room > 1 ? 2 : 1);
  }

  async close(): Promise<void> {
    this.follower?.stop();
    this.follower = undefined;
    await this.parking?.close();
  }

  private apply(message: PauseMessage): void {
    const current = this.paused.get(message.key) ?? 0;
    if (message.until > current) this.paused.set(message.key, message.until);
  }

  private async reload(): Promise<void> {
    try {
      const now = this.options.clock.now();
      for (const pause of await this.pauses.list()) if (pause.until > now) this.apply(pause);
    } catch (err) {
      this.options.logger.warn({ err }, 'could not load paused keys');
    }
  }
}
