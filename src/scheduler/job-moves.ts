import {
  raw2NextJobData,
  Worker,
  type Job,
  type JobJson,
  type Processor,
  type WorkerOptions as BullWorkerOptions,
} from 'bullmq';
import type { RedisClient } from '../redis/connection.js';
import { parseJobState, serializeJobState, type JobState } from '../policy/job-state.js';
import { requeueKeys } from '../redis/keys.js';
import { runScript } from '../redis/scripts.js';
import { wrapCompletion, type CompletionBackend } from './bull-completion.js';
import { isObject, parseJson } from '../util/json.js';

/**
 * The one module that knows BullMQ's insides: its key layout (`bull:<queue>:…`,
 * a job hash per id, `<job>:lock`), the fields of a job hash, its queue
 * backend's `moveToDelayed` (with `fieldsToUpdate` and `fetchNext`),
 * `moveToFinishedArgs` (with `fieldsToUpdate`) and `execCommand`, and the
 * backend's `moveToFinished` (replaced by a copy that sees its reply) and
 * `moveToCompleted` (replaced in `bull-completion.ts`, which stores a result
 * serialised once), their helpers `raw2NextJobData` and `finishedErrors`, and the
 * worker's `createJob`, `handleFailed`, `updateDelays` and `mainLoopQueue`
 * (see {@link BullWorker}). Everything else moves jobs through the functions
 * here.
 * `test/integration/job-moves.test.ts` fails loudly if a BullMQ upgrade
 * changes any of it.
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
  /** BullMQ's priority counter: a prioritized job's score is priority × 2^32 + its next value. */
  readonly pc: string;
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
    pc: `${base}pc`,
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

/** requeue's fields of a job hash (`undefined` where absent). */
interface StateFields {
  rq: string | undefined;
  rql: string | undefined;
  rqo: string | undefined;
  rqm: string | undefined;
}

/**
 * The BullMQ scripts whose reply may carry the next job's whole hash
 * (`HGETALL`), besides `moveToFinished` (see {@link BullWorker}).
 */
const fetchingCommands = new Set(['moveToActive', 'moveToDelayed']);

/** What of BullMQ's queue backend {@link BullWorker} wraps (public in its typings or not). */
interface WrappedBackend extends CompletionBackend {
  /** The worker; its `client` is the connection BullMQ's commands go through. */
  readonly queue: { readonly client: Promise<unknown> };
  execCommand(client: unknown, commandName: string, args: unknown[]): unknown;
  finishedErrors(args: { code: number; jobId: string; command: string; state: string }): Error;
}

/**
 * BullMQ's worker, with three round trips of a retried job folded into BullMQ's
 * own scripts:
 *
 * - **State read with the fetch.** BullMQ's fetch (`moveToActive`, or the
 *   fetch-next of `moveToFinished`/`moveToDelayed`) replies with the job's
 *   whole hash, requeue's fields included, but BullMQ keeps only its own. The
 *   backend's `execCommand` (and, for completions, its `moveToFinished`) is
 *   wrapped to keep requeue's fields of a fetched job until `createJob` makes
 *   the job, which {@link JobMoves.load} then
 *   reads instead of an `HMGET`. A job the capture missed is read as before.
 * - **Success record with the completion.** A completion that changes the
 *   job's state (a success after retries) passes it as BullMQ's
 *   `fieldsToUpdate` of `moveToFinished`, which writes it after checking the
 *   lock, in the same script: no separate fenced write first.
 * - **Next job with the retry.** requeue's move to delayed takes the next job
 *   in the same script (BullMQ's `fetchNext` of `moveToDelayed`) when BullMQ
 *   would fetch one after this job (the test of its `fetchNextCallback`, on
 *   its `mainLoopQueue`), and `handleFailed` hands it to BullMQ's loop as
 *   BullMQ's own `moveToFailed` would, instead of a separate `moveToActive`.
 */
export class BullWorker extends Worker {
  /** requeue's fields of jobs fetched, by id, until `createJob` takes them (microseconds). */
  private readonly captured = new Map<string, StateFields>();
  /** requeue's fields of the jobs this worker made. */
  private readonly fetched = new WeakMap<Job, StateFields>();
  /** The serialised state to complete a job with. */
  private readonly finalState = new WeakMap<Job, string>();
  /** The next job, taken by the move of this one (BullMQ's reply: `[job, id, limit delay, delay until]`). */
  private readonly nextOf = new WeakMap<Job, unknown[]>();

  /**
   * `processor` may return a value rather than a promise: BullMQ awaits what
   * it returns (`processJob`), and a synchronous throw there is a failure too.
   * A processor that is not an async function costs no promise of its own.
   */
  constructor(
    name: string,
    processor: ((job: Job, token: string | undefined) => unknown) | null,
    opts: BullWorkerOptions,
  ) {
    super(name, processor as Processor, opts);
    const backend = this.backend as unknown as WrappedBackend;
    const exec = backend.execCommand.bind(backend);
    backend.execCommand = (client, commandName, commandArgs) => {
      const reply = exec(client, commandName, commandArgs);
      if (!fetchingCommands.has(commandName)) return reply;
      return (reply as Promise<unknown>).then((raw) => {
        this.capture(raw);
        return raw;
      });
    };
    // BullMQ's own `moveToFinished` (a completion, and the next job's fetch),
    // seeing the reply where BullMQ does: every job completes through it, and
    // a wrapped `execCommand` would cost each one a promise more.
    backend.moveToFinished = async (jobId, args) => {
      const client = await backend.queue.client;
      const result = (await exec(client, 'moveToFinished', args)) as unknown;
      if ((result as number) < 0) {
        const code = result as number;
        throw backend.finishedErrors({ code, jobId, command: 'moveToFinished', state: 'active' });
      }
      if (result === undefined) return undefined;
      this.capture(result);
      return raw2NextJobData(result as unknown[]);
    };
    wrapCompletion(backend, (job) => this.finalState.get(job));
  }

  protected override createJob(data: JobJson, jobId: string): Job {
    const job = super.createJob(data, jobId);
    const fields = this.captured.get(jobId);
    if (fields !== undefined) {
      this.captured.delete(jobId);
      this.fetched.set(job, fields);
    }
    return job;
  }

  protected override handleFailed(
    err: Error,
    job: Job,
    token: string,
    fetchNextCallback?: () => boolean,
    span?: Parameters<Worker['handleFailed']>[4],
  ): Promise<Job> {
    const next = this.nextOf.get(job);
    if (next === undefined) return super.handleFailed(err, job, token, fetchNextCallback, span);
    this.nextOf.delete(job);
    const [jobData, jobId, limitDelay, delayUntil] = next as [JobJson, string, number, number];
    (this as unknown as { updateDelays(limit?: number, until?: number): void }).updateDelays(
      limitDelay,
      delayUntil,
    );
    return this.nextJobFromJobData(jobData, jobId, token);
  }

  /**
   * BullMQ's move to delayed (fenced by the lock), taking the next job in the
   * same script when BullMQ would fetch one after this job.
   */
  async moveToDelayed(
    job: Job,
    token: string,
    timestamp: number,
    delayMs: number,
    opts: { skipAttempt: boolean; fieldsToUpdate: Record<string, string | number> },
  ): Promise<void> {
    // BullMQ's own test (its `fetchNextCallback`): its loop holds no more jobs than its concurrency.
    const loop = (this as unknown as { mainLoopQueue: { numTotal(): number } | null })
      .mainLoopQueue;
    const fetchNext =
      loop !== null && loop.numTotal() <= this.concurrency && !(this.closing || this.paused);
    const next = await this.backend.moveToDelayed(String(job.id), timestamp, delayMs, token, {
      skipAttempt: opts.skipAttempt,
      fieldsToUpdate: opts.fieldsToUpdate,
      fetchNext,
    });
    if (fetchNext && Array.isArray(next) && next.length > 0) this.nextOf.set(job, next);
  }

  /** requeue's fields as the fetch of `job` read them, or `undefined` when not captured. */
  fetchedState(job: Job): StateFields | undefined {
    return this.fetched.get(job);
  }

  /** Has BullMQ's completion of `job` write `rq` in the same script. */
  completeWithState(job: Job, rq: string): void {
    this.finalState.set(job, rq);
  }

  /** Keeps requeue's fields of a fetched job (`[hash as a flat array, id, …]`). */
  private capture(raw: unknown): void {
    if (!Array.isArray(raw) || !Array.isArray(raw[0])) return;
    const fields = stateFieldsOf(raw[0] as unknown[]);
    if (fields === undefined) {
      // Never leave an older reply's fields for this id (one that did not become a job).
      if (this.captured.size !== 0) this.captured.delete(String(raw[1]));
      return;
    }
    // Taken by `createJob` at once; a reply that never became a job must not pile up.
    if (this.captured.size >= 10_000) this.captured.clear();
    this.captured.set(String(raw[1]), fields);
  }
}

/** requeue's fields in a job hash given as `[field, value, …]`, or `undefined` when it has none. */
function stateFieldsOf(flat: readonly unknown[]): StateFields | undefined {
  let fields: StateFields | undefined;
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const name = flat[i];
    if (name !== 'rq' && name !== 'rql' && name !== 'rqo' && name !== 'rqm') continue;
    fields ??= { rq: undefined, rql: undefined, rqo: undefined, rqm: undefined };
    fields[name] = String(flat[i + 1]);
  }
  return fields;
}

/** Moves of one queue's jobs, fenced by the job's lock. */
export class JobMoves {
  readonly keys: BullKeys;
  private readonly rq;

  constructor(
    private readonly redis: RedisClient,
    private readonly worker: BullWorker,
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
    const fields = this.worker.fetchedState(job);
    const [rq, life, offset, made] = fields
      ? [fields.rq, fields.rql, fields.rqo, fields.rqm]
      : await this.redis.hmget(key, 'rq', 'rql', 'rqo', 'rqm');
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
    await this.worker.moveToDelayed(job, token, now, Math.max(0, Math.round(delayMs)), {
      skipAttempt: !countsAttempt,
      // `rqm`: BullMQ's attempts made (`atm`) once this move has counted its own.
      fieldsToUpdate: {
        rq: serializeJobState(state),
        rqm: job.attemptsMade + (countsAttempt ? 1 : 0),
      },
    });
  }

  /**
   * Has BullMQ's completion of the job (its own fenced move, after the
   * processor returns) store `state` in the same step.
   */
  completeWith(job: Job, state: JobState): void {
    this.worker.completeWithState(job, serializeJobState(state));
  }

  // ---- The dead-letter move (src/scheduler/dlq/ owns it; the fetch path is above) ----

  /**
   * Moves an active job to the DLQ in one script (`src/redis/lua/deadLetter-16.lua`),
   * which also does BullMQ's finalization for BullMQ's keys (the job's
   * deduplication key, its flow parent) and writes BullMQ's `failed` event.
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
    const bull = this.keys;
    const reply = (await runScript(
      this.redis,
      'deadLetter',
      [
        bull.active,
        bull.stalled,
        key,
        `${key}:lock`,
        `${key}:logs`,
        this.rq.dead,
        this.rq.deadRecordPrefix + id,
        this.rq.deadSequence,
        bull.events,
        bull.meta,
        bull.wait,
        `${bull.prefix}paused`,
        bull.marker,
        bull.prioritized,
        `${bull.prefix}pc`,
        bull.delayed,
      ],
      [
        token,
        id,
        serializeJobState(state),
        death,
        deadAt,
        expectedGeneration,
        resendGuardMs,
        bull.prefix,
      ],
    )) as [number, (string | number)?, string?];
    if (reply[0] === 1) return { kind: 'moved', generation: String(reply[1]) };
    if (reply[0] === 3) return { kind: 'vanished' };
    if (reply[0] === 2)
      return { kind: 'occupied', generation: String(reply[1]), state: parseJobState(reply[2]) };
    return { kind: 'lock-lost' };
  }

  // ---- end of the dead-letter move ----

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

/** A dead record to bring back: its id, the death read, the id to take (`replayIdFor`), one if that is taken. */
export interface ReplayRef {
  id: string;
  gen: string;
  want: string;
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
  for (const ref of refs) args.push(ref.id, ref.gen, ref.want, ref.freshId);
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

/**
 * The highest delayed score BullMQ's promotion at `now` takes: `(now + 1) *
 * 0x1000 - 1`, `now` as given (a fraction too), `includes/promoteDelayedJobs.lua`.
 */
export function dueScoreBound(now: number): number {
  return (now + 1) * delayedScoreFactor - 1;
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
  const [name, data, opts, timestamp, ats, rq, rql] = (value(0) === 'hash' ? value(1) : []) as (
    string | null
  )[];
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
    state: parseJobState(rq),
    life: Number(rql ?? 0),
  };
  if (delayed !== null) job.dueAt = delayedDueAt(Number(delayed));
  if (Number.isFinite(Number(timestamp))) job.addedAt = Number(timestamp);
  return job;
}
