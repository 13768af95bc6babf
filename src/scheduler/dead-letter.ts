import { Queue, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import { parseConfig } from '../config/env.js';
import { resolveRedis, type RedisLike } from '../redis/connection.js';
import { jobIdForKey } from './job-id.js';
import { deadLetterQueueName } from '../redis/keys.js';
import { removeWaitingJobs } from '../redis/scripts.js';
import { systemClock, type Clock } from '../util/system.js';
import {
  attemptRecordSchema,
  deadReasons,
  emptyJobState,
  type DeadReason,
  type JobMeta,
} from './job-state.js';

/** A dead job as the DLQ keeps it: everything needed to inspect and replay it. */
export const deadJobRecordSchema = z.object({
  /** The source queue. */
  source: z.string(),
  /** The job's id in the source queue (also its id in the DLQ). */
  id: z.string(),
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

/** Retention of dead jobs, like Sidekiq's dead set. */
export const retentionSchema = z
  .object({
    /** Dead jobs older than this are dropped. @defaultValue 180 days */
    maxAgeMs: z
      .number()
      .int()
      .positive()
      .default(180 * 24 * 3600 * 1000),
    /** At most this many dead jobs are kept; the oldest go first. @defaultValue `10_000` */
    maxCount: z.number().int().positive().default(10_000),
  })
  .strict();
export type Retention = z.infer<typeof retentionSchema>;

export interface DeadLetterOptions {
  connection?: RedisLike;
  retention?: Partial<Retention>;
  clock?: Clock;
}

/** Progress of a bulk operation. */
export interface BulkProgress {
  done: number;
  total: number;
}

export interface BulkOptions {
  /** Replay at most this many jobs per second (SQS's MaxNumberOfMessagesPerSecond). */
  ratePerSec?: number;
  onProgress?: (progress: BulkProgress) => void;
  signal?: AbortSignal;
  /** Jobs per round trip. @defaultValue `500` */
  batchSize?: number;
}

/** A paused queue keeps its jobs in `wait` (BullMQ 6). */
const liveStates = ['wait'] as const;

/**
 * One source queue's dead-letter queue: a BullMQ queue, kept paused, that no
 * worker processes, so BullMQ tooling can see it. Each dead job has the same
 * id as it had in the source queue, which makes every move idempotent: a
 * move interrupted by a crash is finished by running it again.
 */
export class DeadLetterQueue {
  readonly bull: Queue;
  readonly source: Queue;
  readonly retention: Retention;
  private readonly redis: Redis;
  private readonly owned: boolean;
  private readonly clock: Clock;
  private lastRetentionAt = -Infinity;
  private paused: Promise<void> | undefined;

  constructor(
    readonly sourceName: string,
    options: DeadLetterOptions = {},
  ) {
    const { redis, owned } = resolveRedis(options.connection);
    this.redis = redis;
    this.owned = owned;
    this.clock = options.clock ?? systemClock;
    this.retention = parseConfig(retentionSchema, options.retention ?? {}, 'retention');
    this.bull = new Queue(deadLetterQueueName(sourceName), { connection: redis });
    this.source = new Queue(sourceName, { connection: redis });
    // Connection trouble surfaces as the rejection of the call that met it.
    this.bull.on('error', () => undefined);
    this.source.on('error', () => undefined);
  }

  /**
   * Stores a dead job. Idempotent: storing the same id twice keeps the first.
   * Retention is applied at most once a second as jobs arrive.
   */
  async put(record: DeadJobRecord): Promise<void> {
    await this.ensurePaused();
    // One light read (the `data` field only): is this id in the DLQ already?
    const existing = parseRecord(
      await this.redis.hget(this.bull.toKey(dlqJobId(record.id)), 'data'),
    );
    if (existing && existing.deadAt !== record.deadAt) {
      // Another job under the same id (a key re-added after its first job died)
      // died too: keep one record, with both lives' history.
      record = { ...record, history: [...existing.history, ...record.history] };
      await this.removeDead([record.id]);
    } else if (existing) {
      return; // The same death, stored already by a move that was interrupted.
    }
    await this.bull.add(record.name, deadJobRecordSchema.parse(record), {
      jobId: dlqJobId(record.id),
      removeOnComplete: true,
      removeOnFail: true,
    });
    const now = this.clock.now();
    if (now - this.lastRetentionAt >= 1000) {
      this.lastRetentionAt = now;
      await this.applyRetention();
    }
  }

  /** One dead job by its id — or by its idempotency key — or undefined. */
  async get(id: string): Promise<DeadJobRecord | undefined> {
    const job =
      (await this.bull.getJob(dlqJobId(id))) ?? (await this.bull.getJob(dlqJobId(jobIdForKey(id))));
    return job ? toRecord(job) : undefined;
  }

  /** Dead jobs matching `filter`, newest first, paged by `offset` and `limit`. */
  async list(
    filter: DeadJobFilter = {},
    page: { offset?: number; limit?: number } = {},
  ): Promise<DeadJobRecord[]> {
    const offset = page.offset ?? 0;
    const limit = page.limit ?? 50;
    const out: DeadJobRecord[] = [];
    let skipped = 0;
    for await (const record of this.scan(filter)) {
      if (skipped < offset) {
        skipped += 1;
        continue;
      }
      out.push(record);
      if (out.length >= limit) break;
    }
    return out;
  }

  /** How many dead jobs match `filter`. */
  async count(filter: DeadJobFilter = {}): Promise<number> {
    if (isEmptyFilter(filter)) {
      const counts = await this.bull.getJobCounts(...liveStates);
      return counts.wait ?? 0;
    }
    let n = 0;
    for await (const _ of this.scan(filter)) n += 1;
    return n;
  }

  /**
   * Moves matching dead jobs back to the source queue with fresh attempts and
   * their history kept. Each batch is added to the source (idempotent by job
   * id) before it leaves the DLQ, so an interrupted replay loses nothing and a
   * second run finishes it.
   */
  async replay(filter: DeadJobFilter, options: BulkOptions = {}): Promise<BulkProgress> {
    return this.bulk(filter, options, async (records) => {
      await this.source.addBulk(records.map((r) => replayEntry(r)));
      await this.removeDead(records.map((r) => r.id));
    });
  }

  /** Deletes matching dead jobs for good. */
  async purge(filter: DeadJobFilter, options: BulkOptions = {}): Promise<BulkProgress> {
    return this.bulk(filter, options, (records) => this.removeDead(records.map((r) => r.id)));
  }

  /** Drops dead jobs past the retention's age and count. Returns how many went. */
  async applyRetention(): Promise<number> {
    const wait = this.bull.keys.wait!;
    const prefix = this.bull.toKey('');
    const cutoff = this.clock.now() - this.retention.maxAgeMs;
    let removed = 0;
    // The DLQ's list is newest first, so the oldest are at its tail: take them
    // from there while they are past the cutoff (by their deadAt).
    for (;;) {
      const ids = await this.redis.lrange(wait, -500, -1);
      const pipeline = this.redis.pipeline();
      for (const id of ids) pipeline.hget(prefix + id, 'data');
      const replies = ids.length > 0 ? ((await pipeline.exec()) ?? []) : [];
      const old: string[] = [];
      for (let i = ids.length - 1; i >= 0; i -= 1) {
        const record = parseRecord(replies[i]?.[1]);
        if (record && record.deadAt >= cutoff) break;
        old.push(ids[i]!);
      }
      removed += await removeWaitingJobs(this.redis, wait, prefix, old);
      if (old.length < 500) break;
    }
    const excess = (await this.count()) - this.retention.maxCount;
    if (excess > 0) {
      removed += await removeWaitingJobs(
        this.redis,
        wait,
        prefix,
        await this.redis.lrange(wait, -excess, -1),
      );
    }
    return removed;
  }

  async close(): Promise<void> {
    await this.bull.close();
    await this.source.close();
    if (this.owned) this.redis.disconnect();
  }

  /** Removes dead jobs by source id, many per round trip. */
  private async removeDead(sourceIds: string[]): Promise<void> {
    await removeWaitingJobs(
      this.redis,
      this.bull.keys.wait!,
      this.bull.toKey(''),
      sourceIds.map(dlqJobId),
    );
  }

  /** Pauses the DLQ once, so that a worker started on it by mistake takes nothing. */
  private ensurePaused(): Promise<void> {
    this.paused ??= this.bull.pause();
    return this.paused;
  }

  private async *scan(filter: DeadJobFilter): AsyncGenerator<DeadJobRecord> {
    if (filter.id !== undefined) {
      const record = await this.get(filter.id);
      if (record && matches({ ...record, id: filter.id }, filter)) yield record;
      return;
    }
    // Newest first, a page per round trip: only each job's `data` field is
    // read, which is where the dead record lives (BullMQ's getJobs reads and
    // builds whole jobs, several times slower on a large DLQ).
    const pageSize = 500;
    const prefix = this.bull.toKey('');
    for (let start = 0; ; start += pageSize) {
      const ids = await this.redis.lrange(this.bull.keys.wait!, start, start + pageSize - 1);
      if (ids.length === 0) return;
      const pipeline = this.redis.pipeline();
      for (const id of ids) pipeline.hget(prefix + id, 'data');
      const replies = (await pipeline.exec()) ?? [];
      for (const [, raw] of replies) {
        const record = parseRecord(raw);
        if (record && matches(record, filter)) yield record;
      }
      if (ids.length < pageSize) return;
    }
  }

  private async bulk(
    filter: DeadJobFilter,
    options: BulkOptions,
    apply: (records: DeadJobRecord[]) => Promise<void>,
  ): Promise<BulkProgress> {
    const total = await this.count(filter);
    const progress: BulkProgress = { done: 0, total };
    options.onProgress?.(progress);
    const batchSize = Math.max(
      1,
      Math.min(options.batchSize ?? 500, options.ratePerSec ?? Infinity),
    );
    const startedAt = this.clock.now();
    while (!options.signal?.aborted) {
      // Always read from the top: what was handled has left the DLQ.
      const batch = await this.list(filter, { offset: 0, limit: batchSize });
      if (batch.length === 0) break;
      await apply(batch);
      progress.done += batch.length;
      options.onProgress?.({ ...progress, total: Math.max(total, progress.done) });
      if (options.ratePerSec !== undefined) {
        const dueAt = startedAt + (progress.done / options.ratePerSec) * 1000;
        const waitMs = dueAt - this.clock.now();
        if (waitMs > 0) await sleep(waitMs, options.signal);
      }
      if (filter.id !== undefined) break;
    }
    return { done: progress.done, total: Math.max(total, progress.done) };
  }
}

function isEmptyFilter(filter: DeadJobFilter): boolean {
  return Object.values(filter).every((v) => v === undefined);
}

function matches(record: DeadJobRecord, filter: DeadJobFilter): boolean {
  if (filter.id !== undefined && record.id !== filter.id) return false;
  if (filter.reason !== undefined && record.reason !== filter.reason) return false;
  if (filter.name !== undefined && record.name !== filter.name) return false;
  if (filter.since !== undefined && record.deadAt < filter.since) return false;
  if (filter.until !== undefined && record.deadAt >= filter.until) return false;
  return true;
}

function toRecord(job: Job): DeadJobRecord | undefined {
  const parsed = deadJobRecordSchema.safeParse(job.data);
  return parsed.success ? parsed.data : undefined;
}

/** A dead record from a job hash's raw `data` field; anything unreadable is skipped. */
function parseRecord(raw: unknown): DeadJobRecord | undefined {
  if (typeof raw !== 'string') return undefined;
  try {
    const parsed = deadJobRecordSchema.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A dead job's id in the DLQ: its source id, encoded as BullMQ wants custom
 * ids (a generated id like `42` is an integer, which BullMQ refuses).
 */
function dlqJobId(sourceId: string): string {
  return jobIdForKey(sourceId);
}

/**
 * The id a replayed job gets in the source queue: its own id when it was a
 * custom one (an idempotency key), else one derived from the replay count.
 * Deterministic, so replaying twice after a crash adds it once.
 */
export function replayJobId(record: Pick<DeadJobRecord, 'id' | 'replays'>): string {
  return /^\d+$/.test(record.id) ? `${record.id}-r${record.replays + 1}` : record.id;
}

/** The source-queue entry that brings a dead job back: fresh attempts, history carried. */
function replayEntry(record: DeadJobRecord) {
  const meta = (record.opts.rq ?? {}) as JobMeta;
  const carried = emptyJobState();
  carried.history = record.history;
  carried.replays = record.replays + 1;
  const opts = { ...record.opts, jobId: replayJobId(record), rq: { ...meta, carried } };
  delete (opts as Record<string, unknown>).delay;
  delete (opts as Record<string, unknown>).timestamp;
  return { name: record.name, data: record.data, opts };
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });
}
