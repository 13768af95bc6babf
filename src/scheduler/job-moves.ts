import type { Job, Worker } from 'bullmq';
import type { RedisClient } from '../redis/connection.js';
import { parseJobState, serializeJobState, type JobState } from '../policy/job-state.js';
import { requeueKeys } from '../redis/keys.js';
import { runScript } from '../redis/scripts.js';

/**
 * The one module that knows BullMQ's insides: its key layout (`bull:<queue>:…`,
 * a job hash per id, `<job>:lock`), the fields of a job hash, and its queue
 * backend's `moveToDelayed` with `fieldsToUpdate`. Everything else moves jobs
 * through the functions here. `test/integration/job-moves.test.ts` fails
 * loudly if a BullMQ upgrade changes any of it.
 */

/** The BullMQ version whose internals this module was written against. */
export const bullmqVersionSupported = '6.7.0';

/** The keys of a BullMQ queue this module uses. */
export interface BullKeys {
  /** `bull:<queue>:` — a job's hash is this plus its id. */
  readonly prefix: string;
  readonly active: string;
  readonly wait: string;
  readonly stalled: string;
  readonly meta: string;
  readonly marker: string;
  readonly events: string;
  /** Sorted set of delayed jobs, scored {@link delayedScore}. */
  readonly delayed: string;
  readonly prioritized: string;
  readonly completed: string;
  readonly failed: string;
}

/** BullMQ's key layout for queue `name` (prefix `bull`). */
export function bullKeys(name: string, prefix = 'bull'): BullKeys {
  const base = `${prefix}:${name}:`;
  return {
    prefix: base,
    active: `${base}active`,
    wait: `${base}wait`,
    stalled: `${base}stalled`,
    meta: `${base}meta`,
    marker: `${base}marker`,
    events: `${base}events`,
    delayed: `${base}delayed`,
    prioritized: `${base}prioritized`,
    completed: `${base}completed`,
    failed: `${base}failed`,
  };
}

/** What a job's hash holds of requeue's state. */
export interface StoredState {
  state: JobState | undefined;
  /** The job's life: how many times it was replayed. */
  life: number;
  /** BullMQ's started attempts when this life began. */
  lifeOffset: number;
}

/** The result of a dead-letter move. */
export type DeadLetterResult =
  | { kind: 'moved'; generation: string }
  | { kind: 'lock-lost' }
  /** An earlier death holds the id: merge its history and move again expecting `generation`. */
  | { kind: 'occupied'; generation: string; state: JobState | undefined }
  /** The earlier death expected has left meanwhile (replayed or purged): move again expecting none. */
  | { kind: 'vanished' };

/** Moves of one queue's jobs, fenced by the job's lock. */
export class JobMoves {
  readonly keys: BullKeys;
  private readonly rq;

  constructor(
    private readonly redis: RedisClient,
    private readonly worker: Worker,
    readonly queue: string,
  ) {
    this.keys = bullKeys(queue, worker.opts.prefix ?? 'bull');
    this.rq = requeueKeys(queue);
  }

  /**
   * The job's stored state; the first attempt of a first life has none (no
   * round trip). A job that completed and was sent back from outside
   * (bull-board's "retry", `job.retry('completed')`, `retryJobs`) starts a
   * new life here, as a replay would: see {@link completedBefore}.
   */
  async load(job: Job, token: string): Promise<StoredState> {
    if (!mayHaveState(job)) return { state: undefined, life: 0, lifeOffset: 0 };
    const key = this.jobKey(job.id!);
    const [rq, life, offset, made] = await this.redis.hmget(key, 'rq', 'rql', 'rqo', 'rqm');
    const state = parseJobState(rq);
    if (!completedBefore(job.attemptsMade, made, state))
      return { state, life: Number(life ?? 0), lifeOffset: Number(offset ?? 0) };
    const lifeOffset = Math.max(0, job.attemptsStarted - 1);
    const started = await runScript(
      this.redis,
      'startLife',
      [key, `${key}:lock`],
      [token, lifeOffset, job.attemptsMade],
    );
    if (started === -1) throw new Error(`lost the lock of job ${String(job.id)}`);
    return { state, life: Number(started), lifeOffset };
  }

  /**
   * Moves the job to the delayed set, writing its state in the same step
   * (BullMQ's own script; it checks the lock). `countsAttempt: false` for a
   * deferral. Rejects when the lock is no longer ours.
   */
  async delay(
    job: Job,
    token: string,
    state: JobState,
    delayMs: number,
    now: number,
    countsAttempt: boolean,
  ): Promise<void> {
    await this.worker.backend.moveToDelayed(
      String(job.id),
      now,
      Math.max(0, Math.round(delayMs)),
      token,
      {
        skipAttempt: !countsAttempt,
        // `rqm`: BullMQ's attempts made (`atm`) once this move has counted its own.
        fieldsToUpdate: {
          rq: serializeJobState(state),
          rqm: job.attemptsMade + (countsAttempt ? 1 : 0),
        },
      },
    );
  }

  /** Writes the state while the lock is ours (before BullMQ completes the job). */
  async writeState(job: Job, token: string, state: JobState): Promise<boolean> {
    const key = this.jobKey(job.id!);
    const written = await runScript(
      this.redis,
      'setStateIfLocked',
      [key, `${key}:lock`],
      [token, serializeJobState(state)],
    );
    return written === 1;
  }

  /**
   * Moves an active job to the DLQ in one script (`src/redis/lua/deadLetter-9.lua`).
   * With `resendGuardMs`, a marker stays under the job's id that long, so that
   * an add of this id re-sent by the client after a reconnect is a no-op.
   */
  async deadLetter(
    job: Job,
    token: string,
    state: JobState,
    death: string,
    deadAt: number,
    expectedGeneration = '',
    resendGuardMs = 0,
  ): Promise<DeadLetterResult> {
    const id = String(job.id);
    const key = this.jobKey(id);
    const reply = (await runScript(
      this.redis,
      'deadLetter',
      [
        this.keys.active,
        this.keys.stalled,
        key,
        `${key}:lock`,
        `${key}:logs`,
        this.rq.dead,
        this.rq.deadRecordPrefix + id,
        this.rq.deadSequence,
        this.keys.events,
      ],
      [token, id, serializeJobState(state), death, deadAt, expectedGeneration, resendGuardMs],
    )) as [number, (string | number)?, string?];
    if (reply[0] === 1) return { kind: 'moved', generation: String(reply[1]) };
    if (reply[0] === 3) return { kind: 'vanished' };
    if (reply[0] === 2)
      return { kind: 'occupied', generation: String(reply[1]), state: parseJobState(reply[2]) };
    return { kind: 'lock-lost' };
  }

  private jobKey(id: string): string {
    return this.keys.prefix + id;
  }
}

/**
 * Whether an active job may have requeue state to load: not on the first
 * attempt of a job that never finished an attempt (most jobs: no round trip).
 */
export function mayHaveState(job: Job): boolean {
  return job.attemptsStarted > 1 || job.attemptsMade > 0;
}

/**
 * Whether a job now active had completed before: BullMQ counts a completion
 * in the job's `atm` (attempts made), as it counts each retry requeue moves
 * with `moveToDelayed`; requeue records in `rqm` what `atm` was after its own
 * last move. More made than that means a completion since: someone sent the
 * completed job back (stalls and deferrals count nothing). Jobs stored before
 * `rqm` existed are judged by their history's retries and recorded successes.
 */
export function completedBefore(
  attemptsMade: number,
  recorded: string | null | undefined,
  state: JobState | undefined,
): boolean {
  if (attemptsMade <= 0) return false;
  if (recorded !== null && recorded !== undefined && recorded !== '')
    return attemptsMade > Number(recorded);
  let counted = 0;
  for (const record of state?.history ?? [])
    if (
      (record.outcome === 'failed' && record.decision === 'retry') ||
      record.outcome === 'succeeded'
    )
      counted += 1;
  return attemptsMade > counted;
}

/** A dead record to bring back: its id, the death generation read, a fresh id in case its own is taken. */
export interface ReplayRef {
  id: string;
  gen: string;
  freshId: string;
}

/**
 * Moves dead records back into queue `queue`'s wait list, each in one step
 * fenced by its generation (`src/redis/lua/replayDead-6.lua`). Returns, per
 * record, the id it got in the queue, or `undefined` when it was skipped
 * (gone, or a newer death).
 */
export async function replayDeadJobs(
  redis: RedisClient,
  queue: string,
  refs: readonly ReplayRef[],
  now: number,
  prefix = 'bull',
): Promise<{ id: string; to: string | undefined }[]> {
  if (refs.length === 0) return [];
  const bull = bullKeys(queue, prefix);
  const rq = requeueKeys(queue);
  const args: (string | number)[] = [rq.deadRecordPrefix, bull.prefix, now];
  for (const ref of refs) args.push(ref.id, ref.gen, ref.freshId);
  const reply = await runScript<string[]>(
    redis,
    'replayDead',
    [rq.dead, bull.wait, bull.meta, bull.active, bull.marker, bull.events],
    args,
  );
  const out: { id: string; to: string | undefined }[] = [];
  for (let i = 0; i < reply.length; i += 2)
    out.push({ id: reply[i]!, to: reply[i + 1] === '' ? undefined : reply[i + 1] });
  return out;
}

/**
 * BullMQ 6.7 scores a delayed job `dueAtMs * 0x1000 + n`, where n (< 4096)
 * orders jobs due in the same millisecond (`includes/getDelayedScore.lua`).
 */
const delayedScoreFactor = 0x1000;

/** The lowest delayed score of a job due at `dueAtMs`. */
export function delayedScore(dueAtMs: number): number {
  return Math.floor(dueAtMs) * delayedScoreFactor;
}

/** When a delayed job whose score is `score` is due (ms since epoch). */
export function delayedDueAt(score: number): number {
  return Math.floor(score / delayedScoreFactor);
}

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
  if (entries.length === 0) return [];
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
  state: JobState | undefined;
  life: number;
}

/**
 * One job of queue `queue` by id, with where it is, or `undefined` when the
 * queue has no such job: one round trip of reads (HMGET, ZSCORE, LPOS).
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
      .hmget(keys.prefix + id, 'name', 'data', 'opts', 'timestamp', 'ats', 'rq', 'rql')
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
  const [name, data, opts, timestamp, ats, rq, rql] = value(0) as (string | null)[];
  if (name == null) return undefined;
  const delayed = value(1) as string | null;
  const where: LiveJobState =
    delayed !== null
      ? 'delayed'
      : value(2) !== null || value(3) !== null
        ? 'waiting'
        : value(4) !== null
          ? 'active'
          : value(5) !== null
            ? 'completed'
            : value(6) !== null
              ? 'failed'
              : 'unknown';
  const parsedOpts = parseJsonObject(opts);
  const job: LiveJob = {
    id,
    name,
    data: parseJsonValue(data),
    opts: parsedOpts,
    where,
    attemptsStarted: Number(ats ?? 0),
    state: parseJobState(rq),
    life: Number(rql ?? 0),
  };
  if (delayed !== null) job.dueAt = delayedDueAt(Number(delayed));
  if (timestamp != null && Number.isFinite(Number(timestamp))) job.addedAt = Number(timestamp);
  return job;
}

function parseJsonValue(raw: string | null | undefined): unknown {
  if (raw == null) return undefined;
  try {
    return JSON.parse(raw);
  } catch {
    return undefined;
  }
}

function parseJsonObject(raw: string | null | undefined): Record<string, unknown> {
  const value = parseJsonValue(raw);
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};
}
