import type { RedisClient } from '../../redis/connection.js';
import { parseJobState, type JobState } from '../../policy/job-state.js';
import { isObject, parseJson } from '../../util/json.js';
import { bullKeys, delayedDueAt, delayedScore } from './bull-keys.js';

/**
 * Read-only views of a queue's BullMQ sets for the admin API and the CLI:
 * nothing here writes (promise 3).
 */

/**
 * How many of queue `queue`'s delayed jobs fall due in each `[fromMs, toMs)`
 * range (`-Infinity` and `Infinity` allowed): one ZCOUNT each, one round
 * trip, nothing written.
 */
export async function countDelayedDue(
  redis: RedisClient,
  queue: string,
  ranges: readonly (readonly [number, number])[],
  prefix = 'bull',
): Promise<number[]> {
  if (ranges.length === 0) return [];
  const key = bullKeys(queue, prefix).delayed;
  const bound = (ms: number, end: boolean): string =>
    ms === -Infinity ? '-inf' : ms === Infinity ? '+inf' : String(delayedScore(ms) - (end ? 1 : 0));
  const pipeline = redis.pipeline();
  for (const [from, to] of ranges) pipeline.zcount(key, bound(from, false), bound(to, true));
  const replies = (await pipeline.exec()) ?? [];
  return replies.map(([err, n]) => {
    if (err) throw err;
    return Number(n);
  });
}

/** A job of the delayed set, as the admin views show it. */
export interface DelayedJob {
  id: string;
  name: string;
  dueAt: number;
  /** requeue's state of the job (history, deferrals), if it has one. */
  state: JobState | undefined;
  /** The job's life (how many times it was replayed). */
  life: number;
}

/** The `limit` delayed jobs due soonest, with requeue's state. Reads only. */
export async function nextDelayed(
  redis: RedisClient,
  queue: string,
  limit: number,
  prefix = 'bull',
): Promise<DelayedJob[]> {
  const keys = bullKeys(queue, prefix);
  const raw = await redis.zrangebyscore(
    keys.delayed,
    '-inf',
    '+inf',
    'WITHSCORES',
    'LIMIT',
    0,
    limit,
  );
  const entries: [string, number][] = [];
  for (let i = 0; i < raw.length; i += 2) entries.push([raw[i]!, Number(raw[i + 1])]);
  return readDelayed(redis, queue, entries, prefix);
}

/** Delayed jobs `entries` ([id, score], as read from the delayed set) with requeue's state. Reads only. */
export async function readDelayed(
  redis: RedisClient,
  queue: string,
  entries: readonly (readonly [string, number])[],
  prefix = 'bull',
): Promise<DelayedJob[]> {
  if (entries.length === 0) return [];
  const keys = bullKeys(queue, prefix);
  const pipeline = redis.pipeline();
  for (const [id] of entries) pipeline.hmget(keys.prefix + id, 'name', 'rq', 'rql');
  const replies = (await pipeline.exec()) ?? [];
  return entries.map(([id, score], i) => {
    const [name, rq, rql] = (replies[i]?.[1] ?? []) as (string | null)[];
    return {
      id,
      name: name ?? '',
      dueAt: delayedDueAt(score),
      state: parseJobState(rq),
      life: Number(rql ?? 0),
    };
  });
}

/** The soonest delayed jobs, each with BullMQ's attempts made, and the delayed set's size. */
export interface DelayedScan {
  /** How many jobs the delayed set holds. */
  total: number;
  /** Up to the cap, soonest first: [id, score, attempts made]. */
  entries: [id: string, score: number, attemptsMade: number][];
}

/**
 * The soonest `cap` delayed jobs of queue `queue` with their attempts made
 * (`atm`: 0 for a job added with a delay that has not run, ≥ 1 for a job
 * that ran and was delayed again: a retry or a deferral), read 1,000 per
 * round trip. Reads only.
 */
export async function scanDelayed(
  redis: RedisClient,
  queue: string,
  cap: number,
  prefix = 'bull',
): Promise<DelayedScan> {
  const keys = bullKeys(queue, prefix);
  const total = await redis.zcard(keys.delayed);
  const entries: DelayedScan['entries'] = [];
  for (let from = 0; from < Math.min(total, cap); from += 1000) {
    const raw = await redis.zrange(
      keys.delayed,
      from,
      Math.min(from + 1000, cap) - 1,
      'WITHSCORES',
    );
    if (raw.length === 0) break;
    const pipeline = redis.pipeline();
    for (let i = 0; i < raw.length; i += 2) pipeline.hget(keys.prefix + raw[i]!, 'atm');
    const atms = (await pipeline.exec()) ?? [];
    for (let i = 0; i < raw.length; i += 2)
      entries.push([raw[i]!, Number(raw[i + 1]), Number(atms[i / 2]?.[1] ?? 0)]);
  }
  return { total, entries };
}

/** Where a live job is, as BullMQ keeps it. */
export type LiveJobState = 'waiting' | 'active' | 'delayed' | 'completed' | 'failed' | 'unknown';

/** A job of the queue (not the DLQ) read for a view. */
export interface LiveJob {
  id: string;
  name: string;
  data: unknown;
  opts: Record<string, unknown>;
  where: LiveJobState;
  /** For a delayed job: when it is due. */
  dueAt?: number;
  addedAt?: number;
  attemptsStarted: number;
  /** BullMQ's attempts made (`atm`): with the delayed score, a delayed job's fence. */
  attemptsMade: number;
  state: JobState | undefined;
  life: number;
  /** What the handler reported with `job.updateProgress`, if anything. */
  progress?: unknown;
  /** The last stack BullMQ kept for the job (`stacktrace`), unredacted: views redact it. */
  stack?: string | undefined;
  /** A delayed job's score as read (the fence of a retry-now or delete). */
  score?: string;
}

/** The newest entry of BullMQ's `stacktrace` field (a JSON array), if any. */
function lastStack(raw: string | null): string | undefined {
  const parsed = parseJson(raw);
  if (!Array.isArray(parsed)) return undefined;
  const last: unknown = parsed.at(-1);
  return typeof last === 'string' ? last : undefined;
}

/**
 * One job of queue `queue` by id, with where it is, or `undefined` unless a job's hash is
 * there (an id may name a BullMQ key): one round trip (TYPE, HMGET, ZSCORE, LPOS).
 */
export async function readLiveJob(
  redis: RedisClient,
  queue: string,
  id: string,
  prefix = 'bull',
): Promise<LiveJob | undefined> {
  const keys = bullKeys(queue, prefix);
  const replies =
    (await redis
      .pipeline()
      .type(keys.prefix + id)
      .hmget(
        keys.prefix + id,
        'name',
        'data',
        'opts',
        'timestamp',
        'ats',
        'rq',
        'rql',
        'progress',
        'stacktrace',
        'atm',
      )
      .zscore(keys.delayed, id)
      .lpos(keys.wait, id)
      .zscore(keys.prioritized, id)
      .lpos(keys.active, id)
      .zscore(keys.completed, id)
      .zscore(keys.failed, id)
      .exec()) ?? [];
  const value = (i: number): unknown => {
    const [err, v] = replies[i] ?? [];
    if (err) throw err;
    return v;
  };
  const [name, data, opts, timestamp, ats, rq, rql, progress, stacktrace, atm] = (
    value(0) === 'hash' ? value(1) : []
  ) as (string | null)[];
  if (name == null || opts == null || timestamp == null) return undefined;
  const delayed = value(2) as string | null;
  const where: LiveJobState =
    delayed !== null
      ? 'delayed'
      : value(3) !== null || value(4) !== null
        ? 'waiting'
        : value(5) !== null
          ? 'active'
          : value(6) !== null
            ? 'completed'
            : value(7) !== null
              ? 'failed'
              : 'unknown';
  const parsedOpts = parseJson(opts);
  const job: LiveJob = {
    id,
    name,
    data: parseJson(data),
    opts: isObject(parsedOpts) ? parsedOpts : {},
    where,
    attemptsStarted: Number(ats ?? 0),
    attemptsMade: Number(atm ?? 0),
    state: parseJobState(rq),
    life: Number(rql ?? 0),
    progress: progress == null ? undefined : parseJson(progress),
    stack: lastStack(stacktrace ?? null),
  };
  if (delayed !== null) job.score = delayed;
  if (delayed !== null) job.dueAt = delayedDueAt(Number(delayed));
  if (Number.isFinite(Number(timestamp))) job.addedAt = Number(timestamp);
  return job;
}
