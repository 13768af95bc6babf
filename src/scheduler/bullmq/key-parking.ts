import { parkKey, unparkKeys, type UnparkReply } from '../../redis/lua-commands-parking.js';
import type { Logger } from '../../config/logger.js';
import type { JobState } from '../../policy/job-state.js';
import type { RedisClient } from '../../redis/connection.js';
import { requeueKeys } from '../../redis/keys.js';
import type { Clock } from '../../util/system.js';
import { bullKeys, type BullKeys } from './bull-keys.js';
import type { HeldJob } from './held-job.js';
import type { JobMoves } from './job-moves.js';

/** Parking's timings (ms). */
export const parkingDefaults = Object.freeze({
  /**
   * How long a parked job stays in the delayed set if nothing releases it:
   * the last resort only (a release or the stale check comes first).
   */
  backstopMs: 600_000,
  /** A key with parked jobs and no release or park for this long gets one released. */
  staleMs: 5_000,
  /** How often each worker looks for such keys. */
  checkEveryMs: 1_000,
  /** How many of the 'prioritized' set's head a park looks at for the same key's jobs. */
  lookAt: 128,
});

/**
 * Parking a saturated key (issue 22, item 1). A dispatch-keyed job fetched
 * while its key's bulkhead (here) or adaptive limit (fleet) is full is not
 * put back to return on a timer, to be fetched and put back again: it is
 * parked — moved, fenced by its lock, to BullMQ's delayed set at a far
 * backstop time and listed in the key's parked list (`parkKey-4.lua`), with
 * the same key's jobs near the head of the 'prioritized' set — and released
 * into 'prioritized' near the front, one per slot, when an attempt of that key
 * that ran frees its slot in this process (`unparkKeys-9.lua`). A parked job
 * is in BullMQ's delayed state the whole time: promise 1 holds by BullMQ's
 * own states. Crash-safe: a key nobody released or parked for `staleMs` gets
 * one job released by any worker's check (its run, then its slot freeing,
 * restarts the chain), and every parked job comes back by itself at its
 * backstop time. Knows BullMQ's delayed score and priority counter.
 */
export class KeyParking {
  /** Keys with parked jobs (this process's parks, and the fleet's as last read), whose freed slots release them. */
  private readonly parked = new Set<string>();
  private readonly bull: BullKeys;
  private readonly keys: ReturnType<typeof requeueKeys>;
  private timer: NodeJS.Timeout | undefined;
  private checking = false;
  private readonly pending = new Set<Promise<unknown>>();

  constructor(
    private readonly options: {
      redis: RedisClient;
      queue: string;
      bullPrefix: string;
      moves: JobMoves;
      clock: Clock;
      logger: Logger;
      timings?: Partial<typeof parkingDefaults>;
    },
  ) {
    this.bull = bullKeys(options.queue, options.bullPrefix);
    this.keys = requeueKeys(options.queue);
  }

  private get timings(): typeof parkingDefaults {
    return { ...parkingDefaults, ...this.options.timings };
  }

  /**
   * Parks `job` (active, locked by `token`; `state` records its deferral)
   * and the same key's jobs near the head. `running` says how many of the
   * key's attempts run here: with none once the job is parked, no freed slot
   * would release it (the last may have freed while it was being parked),
   * so one is released at once.
   */
  async park(
    job: HeldJob,
    token: string,
    state: JobState,
    key: string,
    running: () => number,
  ): Promise<void> {
    const { backstopMs, lookAt } = this.timings;
    const now = this.options.clock.now();
    const dueAt = Math.floor(now) + backstopMs;
    this.parked.add(key);
    await parkKey(
      this.options.redis,
      [
        this.keys.parkedPrefix + key,
        this.keys.parkedKeys,
        this.bull.prioritized,
        this.bull.delayed,
      ],
      [this.bull.prefix, String(job.id), key, dueAt, now, lookAt, backstopMs],
    );
    await this.options.moves.delay(
      job,
      token,
      parkedState(state, dueAt, backstopMs),
      backstopMs,
      Math.floor(now),
      false,
    );
    if (running() === 0) this.release(key);
  }

  /** An attempt of `key` that ran freed its slot: `count` of its parked jobs are released. */
  freed(key: string, count = 1): void {
    if (this.parked.has(key)) this.release(key, count);
  }

  /** Starts the check for keys nobody released lately. */
  start(): void {
    const every = this.timings.checkEveryMs;
    this.timer = setInterval(() => void this.checkStale(), every);
    this.timer.unref();
  }

  /** Stops the check and waits for the releases in flight. */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await Promise.allSettled([...this.pending]);
  }

  /** Releases `count` of `key`'s parked jobs, or one of each stale key (key ''): what the script said. */
  unpark(key: string, count = 1): Promise<UnparkReply> {
    const b = this.bull;
    const now = this.options.clock.now();
    return unparkKeys(
      this.options.redis,
      [
        this.keys.parkedKeys,
        b.delayed,
        b.prioritized,
        b.pc,
        b.marker,
        b.meta,
        b.events,
        b.active,
        b.wait,
      ],
      [
        b.prefix,
        this.keys.parkedPrefix,
        Math.floor(now),
        key,
        count,
        Math.floor(now) - this.timings.staleMs,
      ],
    );
  }

  private release(key: string, count = 1): void {
    const sent = this.unpark(key, count)
      .then(([, , left]) => {
        if (left === 0) this.parked.delete(key);
      })
      .catch((err: unknown) =>
        // The stale check releases it later.
        this.options.logger.warn({ err, key }, 'could not release a parked job'),
      )
      .finally(() => this.pending.delete(sent));
    this.pending.add(sent);
  }

  private async checkStale(): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    try {
      await this.unpark('');
      // Keys other workers parked: a slot of theirs freeing here releases one too.
      const keys = await this.options.redis.zrange(this.keys.parkedKeys, 0, 999);
      for (const key of keys) this.parked.add(key);
    } catch (err) {
      this.options.logger.warn({ err }, 'could not check parked keys');
    } finally {
      this.checking = false;
    }
  }
}

/**
 * The job's state with its last deferral due at the backstop: a parked job
 * released early is not late (`retry:started` reads this time).
 */
function parkedState(state: JobState, dueAt: number, backstopMs: number): JobState {
  const last = state.history.at(-1);
  if (last?.outcome !== 'deferred') return state;
  const history = state.history.slice(0, -1);
  history.push({ ...last, retryAt: dueAt, delayMs: backstopMs });
  return { ...state, history };
}
