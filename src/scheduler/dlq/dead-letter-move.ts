import type { Logger } from '../../config/logger.js';
import { changeState, type JobState } from '../../policy/job-state.js';
import type { Attempt } from '../attempt/context.js';
import type { DeadJobRecord } from './dead-record.js';
import type { DeadLetterQueue } from './dead-letter-queue.js';
import type { TypedEmitter, WorkerEvents } from '../events.js';
import type { HeldJob } from '../bullmq/held-job.js';
import type { JobMoves } from '../bullmq/job-moves.js';

/** What {@link deadLetter} needs from its worker. */
export interface DeadLetterContext {
  readonly queue: string;
  readonly moves: JobMoves;
  readonly dlq: DeadLetterQueue;
  readonly events: TypedEmitter<WorkerEvents>;
  readonly logger: Logger;
  readonly onDead: ((record: DeadJobRecord) => void | Promise<void>) | undefined;
}

/**
 * How long a keyless job's death keeps a marker under its id: an add the
 * client re-sends after a reconnect (its reply lost with a Redis restart)
 * that arrives after the job already ran and died finds the marker and is a
 * no-op, instead of running the job again beside its dead record. Clients
 * reconnect within seconds (requeue's backoff tops out at 2 s, BullMQ's at
 * 20 s); meanwhile BullMQ's `getJob(id)` of the dead job returns the marker
 * (a job with nothing but `rqgone`), so it is kept no longer than needed.
 */
export const resendGuardMs = 300_000;

/**
 * Moves a job that must die to the DLQ: one fenced script (two round trips
 * when an earlier death of the same id is there, whose history is merged
 * in). Only then is the death announced: one `job:dead-lettered`, one
 * `onDead`, in this process. Returns the record, or undefined when the move
 * did not happen (the lock was lost: whoever has the job now decides).
 */
export async function deadLetter(
  ctx: DeadLetterContext,
  job: HeldJob,
  token: string,
  attempt: Extract<Attempt, { kind: 'dead' }>,
): Promise<DeadJobRecord | undefined> {
  const { death } = attempt;
  let state: JobState = attempt.state;
  // Field by field: a spread copy that adds a field costs microseconds on Node 20.
  const stored = JSON.stringify({
    reason: death.reason,
    message: death.message,
    attempts: death.attempts,
    deadAt: death.deadAt,
    firstFailedAt: state.firstFailedAt,
  });
  // Only a re-send reuses a keyless id; a key is re-used on purpose, for a new job.
  const guardMs = attempt.meta.key === undefined ? resendGuardMs : 0;
  const move = (withState: JobState, expectedGeneration = '') =>
    ctx.moves.deadLetter(job, token, withState, stored, death.deadAt, expectedGeneration, guardMs);
  let moved = await move(state);
  if (moved.kind === 'occupied') {
    // The same id died before (a key re-added after its first job died): one
    // record keeps both lives' history.
    const merged = changeState(state, {
      history: [...(moved.state?.history ?? []), ...state.history],
    });
    moved = await move(merged, moved.generation);
    if (moved.kind === 'vanished') {
      // A replay or purge took the earlier death between the two calls: its
      // history went with it, so this death is stored with its own alone.
      moved = await move(state);
    } else {
      state = merged;
    }
  }
  if (moved.kind !== 'moved') {
    ctx.logger.warn(
      { jobId: job.id, outcome: moved.kind },
      'could not dead-letter the job; whoever holds it now decides',
    );
    return undefined;
  }
  const record: DeadJobRecord = {
    source: ctx.queue,
    id: String(job.id),
    gen: moved.generation,
    name: job.name,
    data: job.data,
    opts: job.opts as Record<string, unknown>,
    ...(attempt.meta.key !== undefined ? { idempotencyKey: attempt.meta.key } : {}),
    reason: death.reason,
    message: death.message,
    attempts: death.attempts,
    history: state.history,
    ...(state.firstFailedAt !== undefined ? { firstFailedAt: state.firstFailedAt } : {}),
    deadAt: death.deadAt,
    replays: attempt.life,
  };
  ctx.logger.warn(
    { jobId: record.id, reason: death.reason, attempts: death.attempts, message: death.message },
    'job dead-lettered',
  );
  ctx.events.safeEmit(ctx.logger, 'job:dead-lettered', {
    queue: ctx.queue,
    jobId: record.id,
    record,
  });
  if (ctx.onDead) {
    try {
      await ctx.onDead(record);
    } catch (err) {
      ctx.logger.error({ err, jobId: record.id }, 'death hook failed');
    }
  }
  return record;
}
