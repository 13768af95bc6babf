import { DelayedError } from './bullmq/bull-queue.js';
import type { Logger } from '../config/logger.js';
import type { Clock } from '../util/system.js';
import type { Attempt } from './attempt/context.js';
import type { BreakerGate } from './breaker-gate.js';
import type { DeadJobRecord, DeadLetterQueue } from './dlq/dead-letter-queue.js';
import { deadLetter } from './dlq/dead-letter-move.js';
import type { TypedEmitter, WorkerEvents } from './events.js';
import type { FetchPause } from './bullmq/fetch-pause.js';
import type { HeldJob } from './bullmq/held-job.js';
import type { JobMoves } from './bullmq/job-moves.js';
import type { KeyGate } from './key-gate.js';

/**
 * What the processor throws once requeue has moved the job itself: BullMQ
 * only checks its type. One instance, so no stack is captured per job.
 */
const movedByRequeue = new DelayedError('moved by requeue');

/** What {@link applyOutcome} needs from its worker. */
export interface ApplyContext {
  readonly queue: string;
  /** The breaker key whose opening pauses fetching (the queue-wide one). */
  readonly queueBreakerKey: string;
  readonly moves: JobMoves;
  readonly dlq: DeadLetterQueue;
  readonly gate: BreakerGate;
  /** The bulkheads, and the parking of full keys' jobs. */
  readonly keys: KeyGate;
  readonly fetch: FetchPause;
  readonly events: TypedEmitter<WorkerEvents>;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly onDead: ((record: DeadJobRecord) => void | Promise<void>) | undefined;
  /** Called after each death (the worker applies the DLQ retention now and then). */
  readonly afterDeath: () => void;
  /** What an empty retry budget does to a retry (`budget.onEmpty`), named when it happens. */
  readonly budgetOnEmpty: 'delay' | 'delay-to-cap' | 'dead-letter';
}

/**
 * Applies an attempt's outcome with one fenced move, then announces it.
 * Returns the result for BullMQ to complete the job with (its own fenced
 * move), or throws BullMQ's `DelayedError`: requeue has moved the job itself,
 * or left it where the last move put it (a refused move: the lock is someone
 * else's; a failed one: stalled recovery brings the job back).
 */
export async function applyOutcome(
  ctx: ApplyContext,
  job: HeldJob,
  token: string,
  attempt: Attempt,
): Promise<unknown> {
  const jobId = String(job.id);
  const log = (): Logger => ctx.logger.child({ jobId, attempt: attempt.attempt });
  try {
    switch (attempt.kind) {
      case 'completed':
        // A success after a crash keeps the crashed attempts in the history:
        // BullMQ's completion stores the state in its own fenced move.
        if (attempt.stateChanged) ctx.moves.completeWith(job, attempt.state);
        return attempt.result;
      case 'retry': {
        const now = ctx.clock.now();
        await ctx.moves.delay(job, token, attempt.state, attempt.delayMs, now, true, attempt.stack);
        const { record } = attempt;
        log().info(
          {
            error: record.error,
            delayMs: attempt.delayMs,
            retryAt: new Date(attempt.retryAt).toISOString(),
            source: record.delaySource,
          },
          'retry scheduled',
        );
        if (record.delaySource === 'budget') announceBudget(ctx, jobId, ctx.budgetOnEmpty);
        ctx.events.safeEmit(ctx.logger, 'retry:scheduled', {
          queue: ctx.queue,
          jobId,
          attempt: attempt.attempt,
          delayMs: attempt.delayMs,
          retryAt: attempt.retryAt,
          record,
        });
        break;
      }
      case 'deferred': {
        const now = ctx.clock.now();
        if (attempt.key === ctx.queueBreakerKey && attempt.reason === 'breaker') {
          // An isolated circuit stays shut until closed by hand: no timer may resume fetching.
          const isolated = ctx.gate.stateOf(attempt.key)?.phase === 'isolated';
          ctx.fetch.pause(isolated ? Number.POSITIVE_INFINITY : attempt.retryAt);
        }
        // A full key's job dispatched fairly (BullMQ's prioritized set) is parked
        // until a slot of its key frees, not put back on a timer: put back, it
        // would come back near the head and be fetched and put back again, as
        // fast as Redis answers, taking the round trips other keys' jobs need.
        // First in, first out, putting back is how the worker gets past a
        // saturated key's jobs to the others': it stays.
        const parking = attempt.reason === 'bulkhead' && job.priority > 0 && ctx.keys.parking;
        const key = attempt.key;
        if (parking)
          await parking.park(job, token, attempt.state, key, () => ctx.keys.runningOf(key));
        else await ctx.moves.delay(job, token, attempt.state, attempt.retryAt - now, now, false);
        ctx.events.safeEmit(ctx.logger, 'job:deferred', {
          queue: ctx.queue,
          jobId,
          untilMs: attempt.retryAt,
          key: attempt.key,
          reason: attempt.reason,
        });
        break;
      }
      case 'dead': {
        const record = await deadLetter(ctx, job, token, attempt);
        if (record) {
          if (attempt.death.reason === 'budget-exhausted')
            announceBudget(ctx, jobId, 'dead-letter');
          ctx.afterDeath();
        }
        break;
      }
      default: {
        // Every kind of outcome is applied above: a new one fails to compile here.
        const unapplied: never = attempt;
        throw new Error(`unknown outcome ${String((unapplied as Attempt).kind)}`);
      }
    }
  } catch (err) {
    log().warn({ err, outcome: attempt.kind }, 'could not move the job; leaving it');
  }
  throw movedByRequeue;
}

/**
 * An empty retry budget's doing, read off the outcome itself: a retry
 * delayed by the empty bucket (its delay's source `budget`) or a death filed under
 * `budget-exhausted`.
 */
function announceBudget(
  ctx: ApplyContext,
  jobId: string,
  onEmpty: ApplyContext['budgetOnEmpty'],
): void {
  ctx.logger.warn({ jobId, onEmpty }, 'retry budget empty');
  ctx.events.safeEmit(ctx.logger, 'budget:exhausted', { queue: ctx.queue, jobId, action: onEmpty });
}
