import type { Job, Worker } from 'bullmq';
import { attemptOf } from '../../policy/attempt-history.js';
import { readJobMeta, stateForLife } from '../../policy/job-state.js';
import type { Attempt } from '../attempt/context.js';
import type { StoredState } from './job-moves.js';

/**
 * What of BullMQ 6.7's worker this module changes: `getUnrecoverableErrorMessage`
 * (private in its typings), which `processJob` asks before it calls the
 * processor; a message there fails the job straight into BullMQ's failed set.
 */
interface DeferringWorker {
  getUnrecoverableErrorMessage(job: Job): string | undefined;
}

/**
 * Has `worker` hand a job with a deferred failure to its processor instead of
 * failing it into BullMQ's failed set. BullMQ sets a job's `deferredFailure`
 * (`defa`) when a child of a flow dies with `failParentOnFailure` (or when a
 * job stalls past `maxStalledCount`, which requeue sets out of reach) and
 * moves the job to wait; BullMQ's worker then fails it without running it.
 * requeue's processor dead-letters it instead ({@link childFailure}):
 * promise 1, nothing in the failed set. Throws at once if BullMQ has no such
 * method (an upgrade changed it).
 */
export function processDeferredFailures(worker: Worker): void {
  const w = worker as unknown as DeferringWorker;
  const unrecoverable = w.getUnrecoverableErrorMessage.bind(worker);
  w.getUnrecoverableErrorMessage = (job) => (job.deferredFailure ? undefined : unrecoverable(job));
}

/**
 * The death of a job whose child failed (`job.deferredFailure`, BullMQ's
 * `child <child's key> failed`): dead-lettered as `child-failed` without
 * running its handler, the attempt it was fetched for not counted.
 */
export function childFailure(
  job: Job,
  stored: StoredState,
  now: number,
): Extract<Attempt, { kind: 'dead' }> {
  const meta = readJobMeta(job.opts);
  const state = stateForLife(stored.state, stored.life);
  const attempt = attemptOf(job.attemptsStarted, stored.lifeOffset, state);
  return {
    attempt,
    meta,
    life: stored.life,
    kind: 'dead',
    death: {
      reason: 'child-failed',
      message: job.deferredFailure,
      attempts: Math.max(0, attempt - 1),
      deadAt: now,
    },
    state,
  };
}
