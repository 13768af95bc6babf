import { z } from 'zod';
import {
  createWorker,
  type RequeueJob,
  type RequeueWorker,
  type WorkerOptions,
} from '../../src/scheduler/requeue-worker.js';
import { deadReasons } from '../../src/errors/dead-reason.js';
import { PermanentError } from '../../src/errors/permanent-error.js';
import { jobIdForKey } from '../../src/scheduler/job-id.js';
import { brokerErrorSchema, reviveBrokerError } from './broker-error.js';

/**
 * The hand-off from a broker consumer (Redis Streams, AMQP, JetStream) to
 * requeue. The consumer ran attempt 1 from the broker; when it failed, it
 * stores a job carrying that attempt's error in the retry queue (idempotent
 * by the message's dedupe key) and only then acknowledges the message.
 *
 * The retry worker's first run of the job does not call the handler: it
 * throws that error again, so the requeue worker classifies it and records
 * it as attempt 1, then schedules attempt 2 after the policy's first delay —
 * or dead-letters the message. Attempt numbers, delays, `maxAttempts` and
 * `maxElapsedMs` thus count the broker attempt exactly, and only the requeue
 * worker decides death.
 */

/** The broker attempt that failed and handed the message off. */
export const brokerAttemptSchema = z.object({
  /** The consumer that ran it. */
  consumer: z.string(),
  /** The broker's delivery count when it ran. */
  deliveries: z.int().min(1),
  /** When it failed, ms since the epoch. */
  failedAt: z.number(),
  error: brokerErrorSchema,
  /**
   * The consumer already judged the message dead (JetStream `nak` mode: its
   * own deliveries used the attempts up): the replay dead-letters it with
   * this reason instead of scheduling a retry.
   */
  dead: z.enum(deadReasons).optional(),
  /**
   * Attempts made before this broker attempt: set when the message was a
   * retry republished by requeue (`x-requeue-attempt` N gives N - 1), so a
   * republished chain counts against `maxAttempts` as one.
   */
  priorAttempts: z.int().min(0).max(10_000).optional(),
});

/** The broker attempt of a hand-off job, as stored. */
export type BrokerAttempt = z.infer<typeof brokerAttemptSchema>;

/** Whether this run of a hand-off job is the replay of the broker attempt (not a DLQ replay). */
export function isBrokerAttemptRun(job: RequeueJob<unknown>): boolean {
  return job.attempt === 1 && job.history.length === 0;
}

/**
 * Records the broker attempt on the job's history (`phase`: which broker)
 * and throws its error, for requeue to classify as attempt 1.
 */
export function replayBrokerAttempt(
  job: RequeueJob<unknown>,
  attempt: BrokerAttempt,
  phase: string,
  maxAttempts = Infinity,
): never {
  job.annotate({
    phase,
    consumer: attempt.consumer,
    deliveries: attempt.deliveries,
    failedAt: attempt.failedAt,
    ...(attempt.priorAttempts !== undefined && { priorAttempts: attempt.priorAttempts }),
  });
  if (attempt.dead !== undefined) {
    throw new PermanentError(attempt.error.message, { deadReason: attempt.dead });
  }
  if ((attempt.priorAttempts ?? 0) + 1 >= maxAttempts) {
    throw new PermanentError(attempt.error.message, { deadReason: 'max-attempts' });
  }
  throw reviveBrokerError(attempt.error);
}

/** Options of {@link createHandOffWorker}. */
export interface HandOffWorkerOptions<D> extends Omit<WorkerOptions<D>, 'schema'> {
  /** The hand-off job's data. */
  schema: z.ZodType<D>;
  /** The broker attempt stored in a job's data. */
  attemptOf: (data: D) => BrokerAttempt;
  /** Names the broker in the attempt's history record (`stream`, `amqp`, `nats`). */
  phase: string;
  /** Runs attempts 2, 3, … (and every run of a job replayed from the DLQ). */
  run: (job: RequeueJob<D>) => Promise<void>;
}

/**
 * A requeue worker on a broker consumer's retry queue: the first run of each
 * job replays the broker attempt's error, later runs call `run`.
 */
export function createHandOffWorker<D>(
  queue: string,
  options: HandOffWorkerOptions<D>,
): RequeueWorker<D, void> {
  const { attemptOf, phase, run, ...workerOptions } = options;
  const worker: RequeueWorker<D, void> = createWorker<D, void>(
    queue,
    async (job) => {
      if (isBrokerAttemptRun(job)) {
        replayBrokerAttempt(job, attemptOf(job.data), phase, worker.policy.maxAttempts);
      }
      await run(job);
    },
    workerOptions,
  );
  return worker;
}

/** What {@link findHandOff} reads: the retry queue and its DLQ. */
export interface HandOffStores {
  retryQueue: { hasJob(id: string): Promise<boolean> };
  dlq: { get(idOrKey: string): Promise<{ id: string } | undefined | null> };
}

/** The hand-off job (waiting, delayed, active or dead) of an idempotency key, if the hand-off happened. */
export async function findHandOff(stores: HandOffStores, key: string): Promise<string | undefined> {
  const jobId = jobIdForKey(key);
  if (await stores.retryQueue.hasJob(jobId)) return jobId;
  return (await stores.dlq.get(key))?.id;
}
