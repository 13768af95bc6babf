/** The attempt's types: what a handler sees, what the attempt needs from its worker, what it ends as. */
import type { Job } from 'bullmq';
import type { z } from 'zod';
import type { Logger } from '../../config/logger.js';
import type { BudgetOptions } from '../../policy/budget/budget-options.js';
import type { ClassifyOptions } from '../../policy/classify/classify.js';
import type { AttemptRecord, JobMeta } from '../../policy/job-state.js';
import type { AttemptOutcome } from '../../policy/outcome.js';
import type { RetryPolicy } from '../../policy/retry-policy.js';
import type { Clock, Random } from '../../util/system.js';
import type { BreakerGate } from '../breaker-gate.js';
import type { KeyGate } from '../key-gate.js';
import type { HeldJob } from '../bullmq/held-job.js';
import type { KeyLimits } from '../key-limits.js';
import type { WorkerLimit } from '../worker-limit.js';

/** What a handler receives: the job's data, its idempotency key and its attempt number. */
export interface RequeueJob<T = unknown> {
  readonly id: string;
  readonly name: string;
  readonly data: T;
  readonly queue: string;
  /** The producer's idempotency key, if any (e.g. a webhook-id). Dedupe side effects on it. */
  readonly idempotencyKey: string | undefined;
  /** 1-based attempt number in this life of the job. */
  readonly attempt: number;
  /** How many times the job was replayed from the DLQ (its life; 0 for the first). */
  readonly replays: number;
  /** The attempts before this one (earlier lives included). */
  readonly history: readonly AttemptRecord[];
  readonly tags: Readonly<Record<string, string>>;
  /** Aborted when the attempt times out or the worker closes with a deadline. */
  readonly signal: AbortSignal;
  /** Adds fields to this attempt's history record (status, latency, a body snippet). */
  annotate(details: Record<string, unknown>): void;
  /**
   * Holds back every job of this job's key (its `breakerKey`) on every
   * worker until `untilMs` — what a rate-limited API asks for. Does nothing
   * for a job without a key. A 503 with `Retry-After` pauses the key by
   * itself, and so does a 429 when the key keeps answering 429
   * (`src/policy/limit/throttle.ts`).
   */
  pauseKey(untilMs: number): void;
  /** The underlying BullMQ job, for what requeue does not wrap. */
  readonly bullJob: Job;
}

export type Handler<T, R> = (job: RequeueJob<T>) => Promise<R>;

/** What {@link runAttempt} needs from its worker. */
export interface AttemptContext<T> {
  readonly queue: string;
  readonly handler: Handler<T, unknown>;
  readonly schema: z.ZodType<T> | undefined;
  readonly classify: ClassifyOptions;
  readonly policyOf: (meta: JobMeta) => RetryPolicy;
  readonly gate: BreakerGate;
  readonly keys: KeyGate;
  /** A job's own key (`breakerKey`), or none: bulkheads and pauses apply per key. */
  readonly keyOf: (job: RequeueJob<T>) => string | undefined;
  /** The breaker key of a job, given its own key, or none (no breaker). */
  readonly breakerKeyOf: (key: string | undefined) => string | undefined;
  /** How many jobs of one key may run at once in this process. */
  readonly keyConcurrency: (job: RequeueJob<T>) => number;
  /** Reserves the key's next rate-limit slot for the job (`rateLimit`), when on. */
  readonly rateSlot:
    ((job: RequeueJob<T>, key: string, now: number) => Promise<number | undefined>) | undefined;
  /** The fleet's adaptive limit per key (`adaptiveConcurrency`), when on. */
  readonly limits: KeyLimits | undefined;
  /** The worker's own concurrency limit learned from latency (`concurrencyLimit`), when on. */
  readonly workerLimit: WorkerLimit | undefined;
  readonly budget: BudgetOptions | undefined;
  readonly maxDeferrals: number;
  readonly attemptTimeoutMs: number | undefined;
  /**
   * Registers an attempt's controller so that closing the worker aborts it;
   * returns the function that forgets it. (One set in the worker rather than
   * a listener per attempt on a shared signal.)
   */
  readonly track: (controller: AbortController) => () => void;
  readonly clock: Clock;
  readonly random: Random;
  readonly logger: Logger;
  /**
   * Told when a job back from a retry or a deferral starts (not one a crash
   * interrupted): its due time and now, for the lateness metric.
   */
  readonly onReturn: (job: Job, attempt: number, scheduledAt: number, startedAt: number) => void;
  /**
   * Applies an attempt's outcome: what it returns (or the promise of it) is
   * what BullMQ's processor returns. Must not throw synchronously.
   */
  readonly apply: (job: HeldJob, token: string, attempt: Attempt) => unknown;
  /**
   * What to throw when requeue's own I/O failed (Redis) or a per-job option
   * function threw: the job stays active and comes back through stalled
   * recovery.
   */
  readonly leave: (err: unknown, job: { readonly id?: string | undefined }) => Error;
}

/** An outcome with what the worker needs to announce it. */
export type Attempt = AttemptOutcome & {
  attempt: number;
  meta: JobMeta;
  life: number;
};
