import type { Telemetry } from 'bullmq';
import { z } from 'zod';
import { limits } from '../policy/limits.js';
import type { LoggerOption } from '../config/logger.js';
import type { BreakerOptionsInput } from '../policy/breaker/breaker-options.js';
import type { BudgetOptionsInput } from '../policy/budget/budget-options.js';
import type { AdaptiveConcurrencyInput } from '../policy/limit/limit-options.js';
import type { ConcurrencyLimitInput } from '../policy/limit/gradient-options.js';
import type { ClassifyOptions } from '../policy/classify/classify.js';
import type { RetryPolicyInput } from '../policy/retry-policy.js';
import type { RateLimit } from '../redis/rate-store.js';
import type { RedisLike } from '../redis/connection.js';
import type { Clock, Random } from '../util/system.js';
import type { RequeueJob } from './attempt/context.js';
import type { DeadJobRecord, Retention } from './dlq/dead-letter-queue.js';

/** Options of {@link createWorker}. */
export interface WorkerOptions<T = unknown> {
  /**
   * Redis URL or connection: one Redis, or an ioredis `Cluster`.
   * @defaultValue `REDIS_URL` (a Cluster's seed node when `REDIS_CLUSTER=1`), else `redis://127.0.0.1:6379`
   */
  connection?: RedisLike;
  /** BullMQ's key prefix, the same as the queue's. @defaultValue `'bull'` */
  prefix?: string;
  /**
   * BullMQ's OpenTelemetry hook, passed to its worker as is: with
   * `new BullMQOtel({ tracerName: 'my-app' })` (package `bullmq-otel`)
   * BullMQ's own spans (`process`, `complete`, …) cover this worker's jobs.
   */
  telemetry?: Telemetry;
  /** Jobs processed at once by this worker. @defaultValue `1` */
  concurrency?: number;
  /** The policy for jobs that bring none. @defaultValue full jitter, 1 s base, 30 s cap, 5 attempts */
  policy?: RetryPolicyInput;
  /** How errors are classified (retryable statuses, unknown errors, a predicate). */
  classify?: Partial<ClassifyOptions>;
  /** Payloads must satisfy this; others are dead-lettered with `invalid-payload`. */
  schema?: z.ZodType<T>;
  /** Retention of the DLQ. @defaultValue 180 days, 10,000 jobs */
  retention?: Partial<Retention>;
  /**
   * Called once per death, after the job is stored in the DLQ. Errors it
   * throws are logged, not raised. If this process dies between the move and
   * the call, it is not called: dedupe on `record.gen` if you copy records.
   */
  onDead?: (record: DeadJobRecord) => void | Promise<void>;
  /**
   * An attempt running longer than this fails as a timeout (retryable), and
   * its `signal` is aborted. @defaultValue none: an attempt may run forever
   */
  attemptTimeoutMs?: number;
  /** How long a job's lock lasts before it is thought stalled. @defaultValue `30_000` */
  lockDurationMs?: number;
  /** How often stalled jobs are looked for. @defaultValue `30_000` */
  stalledIntervalMs?: number;
  /**
   * Circuit breaker shared by every worker of the queue through Redis (see
   * `src/policy/breaker/`). Off unless given.
   */
  breaker?: BreakerOptionsInput;
  /**
   * A key per job (e.g. a webhook endpoint): the breaker is kept per key
   * instead of one for the queue, and each key has its own bulkhead
   * (`keyConcurrency`) and its own pause (a `Retry-After`,
   * `job.pauseKey()`), so an open, paused or saturated key holds back only its
   * own jobs. `undefined` for a job gives it none of these.
   */
  breakerKey?: (job: RequeueJob<T>) => string | undefined;
  /**
   * At most this many jobs of one key (`breakerKey`) run at once in this
   * process — a bulkhead, so that a hanging key holds only its share of the
   * slots; the others wait, deferred without using an attempt. A function
   * gives a key its own limit. Only for jobs with a key.
   * @defaultValue a quarter of `concurrency`, at least 1
   */
  keyConcurrency?: number | ((job: RequeueJob<T>) => number | undefined);
  /**
   * Adaptive concurrency per key (`breakerKey`), shared by the fleet: the
   * attempts of one key in flight on every worker together stay under a
   * limit learned from latency and failures (AIMD, kept in Redis; see
   * `src/policy/limit/`). A job over the limit is deferred as a full
   * bulkhead defers it. `{}` turns it on with its defaults. Only for jobs
   * with a key; the per-process `keyConcurrency` still applies.
   * @defaultValue off (`false`)
   */
  adaptiveConcurrency?: AdaptiveConcurrencyInput | false;
  /**
   * The worker's own limit on attempts in flight, learned from their latency
   * (a gradient limiter, `src/policy/limit/gradient.ts`): it starts at
   * `initial` (10), grows while attempts answer within `tolerance` (1.5) ×
   * the fastest latency seen of successes, and shrinks as they slow down, time out or
   * fail, never above `concurrency` — so a dependency past its knee is not
   * sent more work than it can finish. Jobs over the limit wait in the
   * queue. In memory, per worker. `false` turns it off (the worker always
   * runs `concurrency` jobs at once, as BullMQ does).
   * With a `breakerKey` it is off unless given: one slow key must not lower
   * every key's share (the bulkhead and `adaptiveConcurrency` act per key).
   * @defaultValue on (`{}`) when `concurrency` > 1 and there is no `breakerKey`
   */
  concurrencyLimit?: ConcurrencyLimitInput | false;
  /**
   * A rate limit per key (`breakerKey`), held fleet-wide in Redis (GCRA,
   * `src/redis/rate-store.ts`): each attempt reserves its key's next slot,
   * and one whose slot is later is deferred to it — once, no attempt used,
   * and it runs at its slot without asking again. `undefined` for a job: no
   * limit. @defaultValue none
   */
  rateLimit?: (job: RequeueJob<T>) => RateLimit | undefined | Promise<RateLimit | undefined>;
  /** A retry budget shared in Redis (token bucket or ratio). Off unless given. */
  budget?: BudgetOptionsInput;
  /**
   * Past this skew (ms) between this worker's clock and Redis's `TIME`, the
   * worker fetches no job (active ones run on) until its clock is back within
   * it; past 1 s it logs a warning. Every time the worker reads is corrected
   * by the offset it measures either way. @defaultValue `5_000`
   */
  maxClockSkewMs?: number;
  /** How often the worker measures its clock against Redis's. @defaultValue `30_000` */
  clockCheckIntervalMs?: number;
  /**
   * Where a due retry (or any due delayed job: a deferral, a delayed add)
   * goes. `'first'`: to the front of the wait list, ahead of new work, for at
   * most `retryShare` of the jobs this worker takes while new work waits
   * (all of them when it does not), so that a backlog of new jobs does not
   * make retries late and retries never stopping do not starve new jobs.
   * `'fifo'`: to the back, behind all waiting work, as BullMQ does. Give
   * every worker of a queue the same order.
   * @defaultValue `'first'`
   */
  retryOrder?: RetryOrder;
  /**
   * With `retryOrder: 'first'`: the most of the jobs this worker takes that
   * may be due retries moved ahead of waiting new work, in (0, 1].
   * @defaultValue `0.5`
   */
  retryShare?: number;
  /** Start processing at once. @defaultValue `true` */
  autorun?: boolean;
  /**
   * A pino logger (used as is) or pino options (a logger on stderr).
   * @defaultValue warnings and errors on stderr; nothing on stdout
   */
  logger?: LoggerOption;
  clock?: Clock;
  random?: Random;
}

/** Where due retries go: ahead of waiting new work, or behind it. */
export type RetryOrder = 'first' | 'fifo';

/** The retry order's options, as {@link WorkerOptions} has them. */
export const retryOrderSchema = z.object({
  retryOrder: z.enum(['first', 'fifo']).optional(),
  retryShare: z.number().gt(0, 'must be more than 0').max(1, 'must be at most 1').optional(),
});

/** The numbers among {@link WorkerOptions}, with their bounds (`src/policy/limits.ts`). */
export const workerNumbersSchema = z.object({
  concurrency: z.number().int().min(1).max(limits.concurrency).optional(),
  attemptTimeoutMs: z.number().int().min(1).max(limits.timeoutMs).optional(),
  lockDurationMs: z.number().int().min(100).max(limits.timeoutMs).optional(),
  stalledIntervalMs: z.number().int().min(100).max(limits.timeoutMs).optional(),
  keyConcurrency: z.number().int().min(1).max(limits.concurrency).optional(),
  maxClockSkewMs: z.number().int().min(1).max(limits.timeoutMs).optional(),
  clockCheckIntervalMs: z.number().int().min(100).max(limits.timeoutMs).optional(),
});
