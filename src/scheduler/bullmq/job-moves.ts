import type { Job } from 'bullmq';
import type { RedisClient } from '../../redis/connection.js';
import { parseJobState, serializeJobState, type JobState } from '../../policy/job-state.js';
import { requeueKeys } from '../../redis/keys.js';
import * as lua from '../../redis/lua-commands.js';
import { bullKeys, type BullKeys } from './bull-keys.js';
import type { BullWorker } from './bull-worker.js';
import { bullJobOf, type HeldJob } from './held-job.js';

/**
 * The fenced moves of a job through BullMQ's sets: the fetch's state load,
 * the move to delayed, the completion's state, the dead-letter move and
 * replay. The key layout is in `bull-keys.ts`, the worker subclass in
 * `bull-worker.ts`, the read-only views in `bull-reads.ts`; everything
 * outside `src/scheduler/bullmq/` moves jobs through the functions here.
 * `test/integration/job-moves.test.ts` and `job-moves-deaths.test.ts` fail
 * loudly if a BullMQ upgrade changes what they rely on.
 */

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
    const started = await lua.startLife(
      this.redis,
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
    held: HeldJob,
    token: string,
    state: JobState,
    delayMs: number,
    now: number,
    countsAttempt: boolean,
    /** The failed attempt's stack: BullMQ's `stacktrace` field, as BullMQ keeps a failure's. */
    stack?: string,
  ): Promise<void> {
    const job = bullJobOf(held);
    await this.worker.moveToDelayed(job, token, now, Math.max(0, Math.round(delayMs)), {
      skipAttempt: !countsAttempt,
      // `rqm`: BullMQ's attempts made (`atm`) once this move has counted its own.
      fieldsToUpdate: {
        rq: serializeJobState(state),
        rqm: job.attemptsMade + (countsAttempt ? 1 : 0),
        ...(stack === undefined ? {} : { stacktrace: JSON.stringify([stack]) }),
      },
    });
  }

  /**
   * Has BullMQ's completion of the job (its own fenced move, after the
   * processor returns) store `state` in the same step.
   */
  completeWith(job: HeldJob, state: JobState): void {
    this.worker.completeWithState(bullJobOf(job), serializeJobState(state));
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
    job: HeldJob,
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
    const reply = await lua.deadLetter(
      this.redis,
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
    );
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
 * A lane a replay puts jobs in instead of the wait list (which BullMQ serves
 * before every keyed job): a key of fair dispatch and its cost (1 / weight),
 * so the replayed jobs take that key's fair share of turns and no more (each
 * keeps its own dispatch key for parking).
 */
export interface ReplayLane {
  key: string;
  cost: number;
}

/**
 * Moves dead records back into queue `queue`'s wait list — or into `lane`
 * — each in one step fenced by its generation (`src/redis/lua/replayDead-9.lua`).
 * Returns, per record, the id it got in the queue, or `undefined` when it
 * was skipped (gone, or a newer death).
 */
export async function replayDeadJobs(
  redis: RedisClient,
  queue: string,
  refs: readonly ReplayRef[],
  now: number,
  prefix = 'bull',
  lane?: ReplayLane,
): Promise<{ id: string; to: string | undefined }[]> {
  if (refs.length === 0) return [];
  const bull = bullKeys(queue, prefix);
  const rq = requeueKeys(queue);
  const args: (string | number)[] = [
    rq.deadRecordPrefix,
    bull.prefix,
    now,
    lane?.key ?? '',
    lane?.cost ?? 1,
  ];
  for (const ref of refs) args.push(ref.id, ref.gen, ref.want, ref.freshId);
  const reply = await lua.replayDead(
    redis,
    [
      rq.dead,
      bull.wait,
      bull.meta,
      bull.active,
      bull.marker,
      bull.events,
      bull.prioritized,
      bull.pc,
      rq.fair,
    ],
    args,
  );
  const out: { id: string; to: string | undefined }[] = [];
  for (let i = 0; i < reply.length; i += 2)
    out.push({ id: reply[i]!, to: reply[i + 1] === '' ? undefined : reply[i + 1] });
  return out;
}
