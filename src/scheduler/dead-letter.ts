import { z } from 'zod';
import { parseConfig } from '../util/parse-config.js';
import { libraryLogger, type Logger, type LoggerOption } from '../config/logger.js';
import {
  attemptRecordSchema,
  deadReasons,
  parseJobState,
  type DeadReason,
} from '../policy/job-state.js';
import { isCluster, resolveRedis, type RedisClient, type RedisLike } from '../redis/connection.js';
import { bullPrefix, requeueKeys } from '../redis/keys.js';
import { runScript } from '../redis/scripts.js';
import { sleep } from '../util/lifecycle.js';
import { systemClock, type Clock } from '../util/system.js';
import {
  retentionSchema,
  runRetentionPass,
  type Retention,
  type RetentionPass,
  type RetentionResult,
} from './dlq-retention.js';
import { replayDeadJobs } from './job-moves.js';
import { metaKey, replayRefs } from './replay-ids.js';
import { isObject, parseJson } from '../util/json.js';
import { lookupIds } from './job-id.js';

/** A dead job as the DLQ keeps it: everything needed to inspect and replay it. */
export const deadJobRecordSchema = z.object({
  /** The source queue. */
  source: z.string(),
  /** The job's id in the source queue (also its id in the DLQ). */
  id: z.string(),
  /** This death's generation: unique per death; replay and purge act only on the death they read. */
  gen: z.string(),
  name: z.string(),
  data: z.unknown(),
  /** The job's original options, requeue's meta included. */
  opts: z.record(z.string(), z.unknown()),
  idempotencyKey: z.string().optional(),
  reason: z.enum(deadReasons),
  /** The last error's message, or why the job died. */
  message: z.string(),
  /** Attempts in the life that ended here. */
  attempts: z.number().int(),
  history: z.array(attemptRecordSchema),
  firstFailedAt: z.number().optional(),
  deadAt: z.number(),
  /** How many times this job had already been replayed. */
  replays: z.number().int().default(0),
});
export type DeadJobRecord = z.infer<typeof deadJobRecordSchema>;

/** The death itself, as stored in the record's `dead` field. */
export const deathSchema = z.object({
  reason: z.enum(deadReasons),
  message: z.string(),
  attempts: z.number().int(),
  deadAt: z.number(),
  firstFailedAt: z.number().optional(),
});
export type StoredDeath = z.infer<typeof deathSchema>;

/** Which dead jobs an operation applies to. */
export interface DeadJobFilter {
  id?: string;
  reason?: DeadReason;
  name?: string;
  /** Dead at or after this time (ms since epoch). */
  since?: number;
  /** Dead before this time (ms since epoch). */
  until?: number;
}

export { retentionSchema, type Retention, type RetentionResult } from './dlq-retention.js';

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

/** Progress of a bulk operation. */
export interface BulkProgress {
  done: number;
  total: number;
}

/** What a replay did. */
export interface ReplayResult extends BulkProgress {
  /** Dead jobs whose source id was taken, replayed under a fresh id (history kept). */
  renamed: { from: string; to: string }[];
}

export interface BulkOptions {
  /** Replay at most this many jobs per second (SQS's MaxNumberOfMessagesPerSecond). */
  ratePerSec?: number;
  onProgress?: (progress: BulkProgress) => void;
  signal?: AbortSignal;
  /** Jobs per round trip. @defaultValue `500` */
  batchSize?: number;
}

/** The fields of a dead record's hash that make up a {@link DeadJobRecord}. */
const recordFields = ['name', 'data', 'opts', 'rq', 'rql', 'gen', 'dead'] as const;
/** The fields a filter needs. */
const filterFields = ['name', 'gen', 'dead'] as const;

/** A dead record located: its id, its death generation and what filters look at. */
interface DeadRef {
  id: string;
  gen: string;
  name: string;
  death: StoredDeath;
}

/**
 * One source queue's dead-letter queue. A dead job is its BullMQ hash,
 * renamed at its death to `requeue:{<queue>}:dead:<id>` with the death added,
 * and indexed by death time in a sorted set; every move in or out is one
 * Lua script, fenced by the job's lock (in) or the death's generation (out).
 */
export class DeadLetterQueue {
  readonly retention: Retention;
  private readonly redis: RedisClient;
  private readonly owned: boolean;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly keys;

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
  }

  /** One dead job by its idempotency key — or by its id — or undefined (see {@link lookupIds}). */
  async get(id: string): Promise<DeadJobRecord | undefined> {
    const records = await this.readMany(lookupIds(id));
    return records.find((r) => r !== undefined);
  }

  /** Dead jobs matching `filter`, newest first, paged by `offset` and `limit`. */
  async list(
    filter: DeadJobFilter = {},
    page: { offset?: number; limit?: number } = {},
  ): Promise<DeadJobRecord[]> {
    const offset = page.offset ?? 0;
    const limit = page.limit ?? 50;
    if (filter.id === undefined && filter.reason === undefined && filter.name === undefined) {
      // Only times, or nothing: the index pages by itself, one page read (a dashboard polls this).
      const [min, max] = scoreRange(filter);
      // In death order already (indexPage), as the scan below yields them.
      const records = await this.readMany(await this.indexPage(min, max, offset, limit));
      return records.filter((r): r is DeadJobRecord => r !== undefined);
    }
    const refs: DeadRef[] = [];
    let skipped = 0;
    for await (const ref of this.scan(filter)) {
      if (skipped < offset) {
        skipped += 1;
        continue;
      }
      refs.push(ref);
      if (refs.length >= limit) break;
    }
    const records = await this.readMany(refs.map((r) => r.id));
    return records.filter((r): r is DeadJobRecord => r !== undefined);
  }

  /**
   * One page of {@link list} and the {@link count} of all that match, with
   * one scan of the records when a reason or name filter needs one.
   */
  async page(
    filter: DeadJobFilter = {},
    page: { offset?: number; limit?: number } = {},
  ): Promise<{ total: number; items: DeadJobRecord[] }> {
    if (filter.id === undefined && filter.reason === undefined && filter.name === undefined) {
      const [items, total] = await Promise.all([this.list(filter, page), this.count(filter)]);
      return { total, items };
    }
    const offset = page.offset ?? 0;
    const limit = page.limit ?? 50;
    const refs: DeadRef[] = [];
    let total = 0;
    for await (const ref of this.scan(filter)) {
      if (total >= offset && refs.length < limit) refs.push(ref);
      total += 1;
    }
    const records = await this.readMany(refs.map((r) => r.id));
    return { total, items: records.filter((r): r is DeadJobRecord => r !== undefined) };
  }

  /** How many dead jobs match `filter`. */
  async count(filter: DeadJobFilter = {}): Promise<number> {
    if (filter.id === undefined && filter.reason === undefined && filter.name === undefined) {
      if (filter.since === undefined && filter.until === undefined)
        return this.redis.zcard(this.keys.dead);
      return this.redis.zcount(this.keys.dead, ...scoreRange(filter));
    }
    let n = 0;
    for await (const _ of this.scan(filter)) n += 1;
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
  async replay(filter: DeadJobFilter, options: BulkOptions = {}): Promise<ReplayResult> {
    const renamed: ReplayResult['renamed'] = [];
    const progress = await this.bulk(filter, options, async (refs) => {
      const moved = await replayDeadJobs(
        this.redis,
        this.sourceName,
        await replayRefs(this.redis, this.keys.deadRecordPrefix, refs),
        this.clock.now(),
        bullPrefix(this.sourceName, isCluster(this.redis), this.options.prefix),
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
  async purge(filter: DeadJobFilter, options: BulkOptions = {}): Promise<BulkProgress> {
    return this.bulk(filter, options, async (refs) => {
      const args = [this.keys.deadRecordPrefix, ...refs.flatMap((r) => [r.id, r.gen])];
      return runScript<number>(this.redis, 'purgeDead', [this.keys.dead], args);
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
    return runRetentionPass(
      {
        redis: this.redis,
        keys: this.keys,
        retention: this.retention,
        clock: this.clock,
        logger: this.logger,
        onTrim: this.options.onTrim,
      },
      signal,
    );
  }

  async close(): Promise<void> {
    if (this.owned) this.redis.disconnect();
  }

  /**
   * The ids of one page of the index, newest death first, deaths of the same
   * millisecond in the order they died (by generation): the same order as
   * the whole list, wherever the page's edges fall. The index itself orders
   * such ties by id, so the deaths of the page's first and last milliseconds
   * are read whole and placed by generation.
   */
  private async indexPage(
    min: string,
    max: string,
    offset: number,
    limit: number,
  ): Promise<string[]> {
    // One read-only script: read in steps, a death landing between them shifted the page.
    const [raw, above, firstGroup, lastGroup] = await runScript<
      [string[], number, string[], string[]]
    >(this.redis, 'deadPage', [this.keys.dead], [max, min, offset, limit]);
    if (raw.length === 0) return [];
    const scoreOf = new Map<string, number>();
    for (let i = 0; i < raw.length; i += 2) scoreOf.set(raw[i]!, Number(raw[i + 1]));
    const first = raw[1]!;
    const last = raw[raw.length - 1]!;
    for (const id of firstGroup) scoreOf.set(id, Number(first));
    for (const id of lastGroup) scoreOf.set(id, Number(last));
    const ordered = await this.byDeathOrder([...scoreOf.keys()], scoreOf);
    const start = offset - above;
    return ordered.slice(start, start + limit);
  }

  /** `ids` newest death first, deaths of one millisecond by generation, newest first. */
  private async byDeathOrder(ids: string[], scoreOf: Map<string, number>): Promise<string[]> {
    const scores = new Set(scoreOf.values());
    if (scores.size === ids.length) return ids.sort((a, b) => scoreOf.get(b)! - scoreOf.get(a)!);
    const pipeline = this.redis.pipeline();
    for (const id of ids) pipeline.hget(this.keys.deadRecordPrefix + id, 'gen');
    const replies = (await pipeline.exec()) ?? [];
    const genOf = new Map(ids.map((id, i) => [id, Number(replies[i]?.[1] ?? -1)]));
    return ids.sort((a, b) => scoreOf.get(b)! - scoreOf.get(a)! || genOf.get(b)! - genOf.get(a)!);
  }

  private async readMany(ids: readonly string[]): Promise<(DeadJobRecord | undefined)[]> {
    if (ids.length === 0) return [];
    const pipeline = this.redis.pipeline();
    for (const id of ids) pipeline.hmget(this.keys.deadRecordPrefix + id, ...recordFields);
    const replies = (await pipeline.exec()) ?? [];
    return ids.map((id, i) => toRecord(this.sourceName, id, replies[i]?.[1] as RawFields));
  }

  /**
   * Matching dead records, newest first, a page per round trip; only the
   * fields filters need are read. Records that cannot be read are skipped.
   */
  private async *scan(filter: DeadJobFilter): AsyncGenerator<DeadRef> {
    if (filter.id !== undefined) {
      const record = await this.get(filter.id);
      if (record && matches(record, record, filter))
        yield { id: record.id, gen: record.gen, name: record.name, death: record };
      return;
    }
    const pageSize = 1000;
    const [min, max] = scoreRange(filter);
    // Pages by score, newest first. Deaths in the same millisecond straddle a
    // page's edge: the next page starts at that score and skips what was seen.
    // They are yielded a millisecond at a time, in the order they died
    // (the index orders them by id).
    let upper = max;
    let seen = new Set<string>();
    let group: DeadRef[] = [];
    let groupScore = '';
    for (;;) {
      const limit = pageSize + seen.size;
      const raw = await this.redis.zrevrangebyscore(
        this.keys.dead,
        upper,
        min,
        'WITHSCORES',
        'LIMIT',
        0,
        limit,
      );
      const entries: [string, string][] = [];
      for (let i = 0; i < raw.length; i += 2)
        if (!seen.has(raw[i]!)) entries.push([raw[i]!, raw[i + 1]!]);
      if (entries.length === 0) {
        yield* byGeneration(group);
        return;
      }
      const pipeline = this.redis.pipeline();
      for (const [id] of entries) pipeline.hmget(this.keys.deadRecordPrefix + id, ...filterFields);
      const replies = (await pipeline.exec()) ?? [];
      for (let i = 0; i < entries.length; i += 1) {
        const [id, score] = entries[i]!;
        if (score !== groupScore) {
          yield* byGeneration(group);
          group = [];
          groupScore = score;
        }
        const [name, gen, dead] = (replies[i]?.[1] ?? []) as (string | null)[];
        const death = parseDeath(dead);
        if (name == null || gen == null || !death) continue;
        if (matches({ id, name }, death, filter)) group.push({ id, gen, name, death });
      }
      if (raw.length / 2 < limit) {
        yield* byGeneration(group);
        return;
      }
      const lastScore = entries.at(-1)![1];
      const atLast = entries.filter(([, score]) => score === lastScore).map(([id]) => id);
      seen = lastScore === upper ? new Set([...seen, ...atLast]) : new Set(atLast);
      upper = lastScore;
    }
  }

  /**
   * Runs `apply` over the matching deaths as they were at the start, in
   * batches; `apply` returns how many of a batch it handled.
   */
  private async bulk(
    filter: DeadJobFilter,
    options: BulkOptions,
    apply: (refs: DeadRef[]) => Promise<number>,
  ): Promise<BulkProgress> {
    const snapshot: DeadRef[] = [];
    for await (const ref of this.scan(filter)) snapshot.push(ref);
    const progress: BulkProgress = { done: 0, total: snapshot.length };
    options.onProgress?.({ ...progress });
    const batchSize = Math.max(
      1,
      Math.min(options.batchSize ?? 500, options.ratePerSec ?? Infinity),
    );
    const startedAt = this.clock.now();
    let handled = 0;
    for (let i = 0; i < snapshot.length && !options.signal?.aborted; i += batchSize) {
      const batch = snapshot.slice(i, i + batchSize);
      progress.done += await apply(batch);
      handled += batch.length;
      options.onProgress?.({ ...progress });
      if (options.ratePerSec !== undefined) {
        const dueAt = startedAt + (handled / options.ratePerSec) * 1000;
        const waitMs = dueAt - this.clock.now();
        if (waitMs > 0) await sleep(waitMs, options.signal);
      }
    }
    return progress;
  }
}

type RawFields = (string | null)[] | undefined;

/**
 * The deaths of one millisecond, the last to die first. The index scores by
 * death time, so such deaths come back in the order of their ids (random
 * within a millisecond); their generations give the order they died in.
 */
function byGeneration(group: DeadRef[]): DeadRef[] {
  return group.length < 2 ? group : group.sort((a, b) => Number(b.gen) - Number(a.gen));
}

function toRecord(source: string, id: string, raw: RawFields): DeadJobRecord | undefined {
  if (!raw) return undefined;
  const [name, data, opts, rq, rql, gen, dead] = raw;
  const death = parseDeath(dead);
  if (name == null || gen == null || !death) return undefined;
  const parsedOpts = parseJson(opts);
  const key = metaKey(parsedOpts);
  const record: DeadJobRecord = {
    source,
    id,
    gen,
    name,
    data: parseJson(data),
    opts: isObject(parsedOpts) ? parsedOpts : {},
    ...(key !== undefined ? { idempotencyKey: key } : {}),
    reason: death.reason,
    message: death.message,
    attempts: death.attempts,
    history: parseJobState(rq)?.history ?? [],
    ...(death.firstFailedAt !== undefined ? { firstFailedAt: death.firstFailedAt } : {}),
    deadAt: death.deadAt,
    replays: Number(rql ?? 0),
  };
  return record;
}

function parseDeath(raw: string | null | undefined): StoredDeath | undefined {
  const parsed = deathSchema.safeParse(parseJson(raw));
  return parsed.success ? parsed.data : undefined;
}

function matches(
  record: { id: string; name: string },
  death: StoredDeath,
  filter: DeadJobFilter,
): boolean {
  if (filter.reason !== undefined && death.reason !== filter.reason) return false;
  if (filter.name !== undefined && record.name !== filter.name) return false;
  if (filter.since !== undefined && death.deadAt < filter.since) return false;
  if (filter.until !== undefined && death.deadAt >= filter.until) return false;
  return true;
}

/** The index's score range for a filter's times: [min, max] for ZREVRANGEBYSCORE. */
function scoreRange(filter: DeadJobFilter): [string, string] {
  const min = filter.since !== undefined ? String(filter.since) : '-inf';
  const max = filter.until !== undefined ? `(${filter.until}` : '+inf';
  return [min, max];
}
