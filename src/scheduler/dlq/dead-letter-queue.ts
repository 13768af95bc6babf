import { libraryLogger, type Logger, type LoggerOption } from '../../config/logger.js';
import {
  isCluster,
  resolveRedis,
  type RedisClient,
  type RedisLike,
} from '../../redis/connection.js';
import { bullPrefix, requeueKeys } from '../../redis/keys.js';
import * as lua from '../../redis/lua-commands.js';
import { parseConfig } from '../../util/parse-config.js';
import { systemClock, type Clock } from '../../util/system.js';
import { replayDeadJobs, type ReplayLane } from '../bullmq/job-moves.js';
import { runBulk, type BulkOptions, type BulkProgress } from './bulk.js';
import { DeadIndex, type DeadPage } from './dead-index.js';
import { byTimeOnly, type DeadJobFilter, type DeadJobRecord } from './dead-record.js';
import { replayRefs } from './replay-ids.js';
import {
  retentionSchema,
  runRetentionPass,
  type Retention,
  type RetentionPass,
  type RetentionResult,
} from './retention-pass.js';
import { sleep } from '../../util/lifecycle.js';

export {
  deadJobRecordSchema,
  deathSchema,
  type DeadJobFilter,
  type DeadJobRecord,
  type StoredDeath,
} from './dead-record.js';
export { retentionSchema, type Retention, type RetentionResult } from './retention-pass.js';
export type { BulkOptions, BulkProgress } from './bulk.js';
export type { ReplayLane } from '../bullmq/job-moves.js';

/** Options of {@link DeadLetterQueue.replay}. */
export interface ReplayOptions extends BulkOptions {
  /**
   * Put the replayed jobs in this fair-dispatch lane instead of the wait
   * list (which goes before every keyed job): a bulk recovery that must not
   * starve live traffic.
   */
  lane?: ReplayLane;
}

export interface DeadLetterOptions {
  connection?: RedisLike;
  /** BullMQ's key prefix of the source queue, where replays go. @defaultValue `'bull'` */
  prefix?: string | undefined;
  retention?: Partial<Retention>;
  clock?: Clock;
  /** A pino logger or pino options. @defaultValue warnings and errors on stderr */
  logger?: LoggerOption;
  /** Told of every retention pass that removed something (metrics). */
  onTrim?: (removed: RetentionResult) => void;
}

/** What a replay did. */
export interface ReplayResult extends BulkProgress {
  /** Dead jobs whose source id was taken, replayed under a fresh id (history kept). */
  renamed: { from: string; to: string }[];
}

/**
 * One source queue's dead-letter queue: reads, replay, purge and retention.
 * A dead job is its BullMQ hash, renamed at its death to
 * `requeue:{<queue>}:dead:<id>` with the death added, and indexed by death
 * time in a sorted set (`dead-index.ts` reads them); every move in or out is
 * one Lua script, fenced by the job's lock (in: `dead-letter-move.ts`) or the
 * death's generation (out: replay and purge here).
 */
export class DeadLetterQueue {
  readonly retention: Retention;
  private readonly redis: RedisClient;
  private readonly owned: boolean;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly keys;
  private readonly index: DeadIndex;

  constructor(
    readonly sourceName: string,
    private readonly options: DeadLetterOptions = {},
  ) {
    const { redis, owned } = resolveRedis(options.connection);
    this.redis = redis;
    this.owned = owned;
    this.clock = options.clock ?? systemClock;
    this.logger = libraryLogger(options.logger).child({ queue: sourceName });
    this.retention = parseConfig(retentionSchema, options.retention ?? {}, 'retention');
    this.keys = requeueKeys(sourceName);
    this.index = new DeadIndex(redis, sourceName, this.keys);
  }

  /** One dead job by its idempotency key — or by its id — or undefined. */
  get(id: string): Promise<DeadJobRecord | undefined> {
    return this.index.find(id);
  }

  /** Dead jobs matching `filter`, newest first, paged by `offset` and `limit`. */
  async list(filter: DeadJobFilter = {}, page: DeadPage = {}): Promise<DeadJobRecord[]> {
    return (await this.index.page(filter, page, false)).items;
  }

  /**
   * One page of {@link list} and the {@link count} of all that match, with
   * one scan of the records when a reason or name filter needs one.
   */
  page(
    filter: DeadJobFilter = {},
    page: DeadPage = {},
  ): Promise<{ total: number; items: DeadJobRecord[] }> {
    return this.index.page(filter, page, true);
  }

  /** How many dead jobs match `filter`. */
  async count(filter: DeadJobFilter = {}): Promise<number> {
    if (byTimeOnly(filter)) return this.index.countByTime(filter);
    let n = 0;
    for await (const _ of this.index.scan(filter)) n += 1;
    return n;
  }

  /**
   * Moves matching dead jobs back to the source queue with fresh attempts and
   * their history kept. Works on the deaths that matched when it started: a
   * job that dies again meanwhile is a new death and is left alone, so a
   * replay cannot run away. Each job moves in one step, only if its record is
   * still the death that was read; a taken source id gives a fresh id.
   * Interrupted and run again, it replays what is left.
   */
  async replay(filter: DeadJobFilter, options: ReplayOptions = {}): Promise<ReplayResult> {
    const renamed: ReplayResult['renamed'] = [];
    const prefix = bullPrefix(this.sourceName, isCluster(this.redis), this.options.prefix);
    const progress = await runBulk(this.index.scan(filter), options, this.clock, async (refs) => {
      const want = await replayRefs(this.redis, this.keys.deadRecordPrefix, refs);
      const moved = await replayDeadJobs(
        this.redis,
        this.sourceName,
        want,
        this.clock.now(),
        prefix,
        options.lane,
      );
      let done = 0;
      for (const { id, to } of moved) {
        if (to === undefined) continue;
        done += 1;
        if (to !== id) renamed.push({ from: id, to });
      }
      return done;
    });
    return { ...progress, renamed };
  }

  /** Deletes matching dead jobs for good (each only if it is still the death that was read). */
  purge(filter: DeadJobFilter, options: BulkOptions = {}): Promise<BulkProgress> {
    return runBulk(this.index.scan(filter), options, this.clock, (refs) => {
      const args = [this.keys.deadRecordPrefix, ...refs.flatMap((r) => [r.id, r.gen])];
      return lua.purgeDead(this.redis, this.keys.dead, args);
    });
  }

  /**
   * Drops dead jobs past the retention's age and count, in steps of at most
   * 1,000 (each one script), waiting while another pass of the fleet runs.
   * Never silent: what it removes is logged as a warning with how many and
   * why, and reported to `onTrim`.
   */
  async applyRetention(): Promise<number> {
    const { byAge, byCount } = await this.trim();
    return byAge + byCount;
  }

  /** {@link applyRetention}, saying how many went for their age and how many for the count. */
  async trim(): Promise<RetentionResult> {
    for (;;) {
      const pass = await this.retentionPass();
      if (pass.kind === 'done') return pass.removed;
      await sleep(Math.min(100, Math.max(10, pass.retryInMs)));
    }
  }

  /** One retention pass, or `busy` when another pass of the fleet runs (see `runRetentionPass`). */
  retentionPass(signal?: AbortSignal): Promise<RetentionPass> {
    const { redis, keys, retention, clock, logger } = this;
    return runRetentionPass(
      { redis, keys, retention, clock, logger, onTrim: this.options.onTrim },
      signal,
    );
  }

  async close(): Promise<void> {
    if (this.owned) this.redis.disconnect();
  }
}
