import type { Job, JobsOptions } from 'bullmq';

declare const held: unique symbol;

/**
 * A job this worker fetched and holds the lock of, as the attempt hands it
 * to its outcome's move: outside `src/scheduler/bullmq/` it shows only what
 * applying an outcome reads, and only this folder turns it back into
 * BullMQ's `Job`. The same object, typed apart: nothing is copied per job.
 */
export interface HeldJob {
  readonly id: string | undefined;
  /** What the dead-letter record keeps of the job. */
  readonly name: string;
  readonly data: unknown;
  readonly opts: JobsOptions;
  /** BullMQ's priority: above 0 for a job dispatched fairly (its prioritized set). */
  readonly priority: number;
  /** BullMQ's count of the job's started attempts. */
  readonly attemptsStarted: number;
  readonly [held]: true;
}

/** The job BullMQ handed to the processor, as the attempt holds it. */
export function holdJob(job: Job): HeldJob {
  return job as unknown as HeldJob;
}

/** The BullMQ job behind a {@link HeldJob} (for the moves in this folder). */
export function bullJobOf(job: HeldJob): Job {
  return job as unknown as Job;
}

const attemptTag = Symbol('requeue.attempt');
type AttemptTagged = Job & { [attemptTag]?: number };

/**
 * Notes the attempt a job completes as, for `job:completed`, where it is not
 * BullMQ's count (a replayed or deferred job): a property added to BullMQ's
 * job costs a shape change per job, so only then.
 */
export function noteCompletedAttempt(job: HeldJob, attempt: number): void {
  if (attempt !== job.attemptsStarted) (job as unknown as AttemptTagged)[attemptTag] = attempt;
}

/** The attempt a completed job ran as (see {@link noteCompletedAttempt}). */
export function completedAttemptOf(job: Job): number {
  return (job as AttemptTagged)[attemptTag] ?? job.attemptsStarted;
}
