import type { RedisClient } from '../redis/connection.js';
import { readLiveJob } from './bullmq/bull-reads.js';
import { moveDelayedJob } from './bullmq/delayed-moves.js';
import { lookupIds } from './job-id.js';

/** What a retry-now move did: moved, or why not. */
export type RetryNowResult = 'moved' | 'not-delayed' | 'attempt-moved-on' | 'parked';

/** What {@link retryJobNow} did, and to which job. */
export interface RetryNowOutcome {
  /** The job's id (the input may have been its idempotency key). */
  id: string | undefined;
  result: RetryNowResult | 'not-found';
  /** The attempts started the move was fenced by. */
  attemptsStarted?: number;
}

/** Options of {@link retryJobNow}. */
export interface RetryNowOptions {
  /**
   * The job's attempts started as the caller saw them (the admin API's
   * `attemptsStarted`): the move happens only while the job is still that
   * scheduled retry. @defaultValue the job's, read now
   */
  attemptsStarted?: number;
  /** BullMQ's key prefix of the queue (with its hash tag on a cluster). @defaultValue `'bull'` */
  prefix?: string;
}

/**
 * Runs a scheduled retry now: job `idOrKey` (its id or idempotency key) of
 * queue `queue`, while in the delayed set at the attempt seen, becomes due
 * at once, in one fenced step; a worker takes it as it takes any due retry.
 * Its history and attempt count are unchanged: only the wait is cut short.
 */
export async function retryJobNow(
  redis: RedisClient,
  queue: string,
  idOrKey: string,
  options: RetryNowOptions = {},
): Promise<RetryNowOutcome> {
  const prefix = options.prefix ?? 'bull';
  for (const id of lookupIds(idOrKey)) {
    const job = await readLiveJob(redis, queue, id, prefix);
    if (!job) continue;
    const attemptsStarted = options.attemptsStarted ?? job.attemptsStarted;
    if (job.where !== 'delayed' || job.score === undefined)
      return { id, result: 'not-delayed', attemptsStarted };
    if (job.attemptsStarted !== attemptsStarted)
      return { id, result: 'attempt-moved-on', attemptsStarted };
    // The same fenced move as the dashboard's (moveDelayed-8.lua), fenced by
    // what was just read: a job that moves on after the read is refused too.
    const fence = { score: job.score, attemptsMade: job.attemptsMade };
    const moved = await moveDelayedJob(redis, queue, 'promote', id, fence, prefix);
    const result: RetryNowResult =
      moved.kind === 'done'
        ? 'moved'
        : moved.kind === 'changed'
          ? 'attempt-moved-on'
          : moved.kind === 'parked'
            ? 'parked'
            : 'not-delayed';
    return { id, result, attemptsStarted };
  }
  return { id: undefined, result: 'not-found' };
}
