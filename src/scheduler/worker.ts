import { DelayedError, Worker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { z } from 'zod';
import { createLogger, type Logger } from '../config/logger.js';
import {
  parseBreakerOptions,
  type BreakerOptions,
  type BreakerOptionsInput,
} from '../policy/breaker/breaker-options.js';
import {
  parseBudgetOptions,
  type BudgetOptions,
  type BudgetOptionsInput,
} from '../policy/budget/budget-options.js';
import { parseClassifyOptions } from '../policy/classify/index.js';
import type { ClassifyOptions } from '../policy/classify/classify.js';
import type { JobMeta } from '../policy/job-state.js';
import {
  parseRetryPolicy,
  type RetryPolicy,
  type RetryPolicyInput,
} from '../policy/retry-policy.js';
import type { BreakerMessage } from '../redis/breaker-store.js';
import { resolveRedis, type RedisLike } from '../redis/connection.js';
import { withDeadline } from '../util/lifecycle.js';
import { systemClock, systemRandom, type Clock, type Random } from '../util/system.js';
import {
  runAttempt,
  type Attempt,
  type AttemptContext,
  type Handler,
  type RequeueJob,
} from './attempt.js';
import { BreakerGate } from './breaker-gate.js';
import { DeadLetterQueue, type DeadJobRecord, type Retention } from './dead-letter.js';
import { deadLetter } from './dead-letterer.js';
import { TypedEmitter, type WorkerEvents } from './events.js';
import { FetchPause } from './fetch-pause.js';
import { JobMoves } from './job-moves.js';

export type { Handler, RequeueJob } from './attempt.js';

/** Options of {@link createWorker}. */
export interface WorkerOptions<T = unknown> {
  /** Redis URL or connection. @defaultValue `REDIS_URL`, else `redis://127.0.0.1:6379` */
  connection?: RedisLike;
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
   * A breaker per key (e.g. a webhook endpoint) instead of one for the queue:
   * an open key holds back only its own jobs. `undefined` skips the breaker.
   */
  breakerKey?: (job: RequeueJob<T>) => string | undefined;
  /** A retry budget shared in Redis (token bucket or ratio). Off unless given. */
  budget?: BudgetOptionsInput;
  /** Start processing at once. @defaultValue `true` */
  autorun?: boolean;
  logger?: Logger;
  clock?: Clock;
  random?: Random;
}

/** The breaker key of the queue-wide breaker (when no `breakerKey` is given). */
export const queueBreakerKey = '__queue__';

/**
 * A requeue worker: a BullMQ worker whose processor runs one attempt
 * (`attempt.ts`) and applies its outcome with one fenced move (`job-moves.ts`,
 * `dead-letterer.ts`), announcing it only once it is stored. This class wires
 * those parts together and owns the lifecycle.
 */
export class RequeueWorker<T = unknown, R = unknown> extends TypedEmitter<WorkerEvents> {
  readonly bull: Worker;
  readonly dlq: DeadLetterQueue;
  readonly policy: RetryPolicy;
  readonly breakerOptions: BreakerOptions | undefined;
  readonly budgetOptions: BudgetOptions | undefined;
  readonly gate: BreakerGate;
  private readonly redis: Redis;
  private readonly owned: boolean;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly closing = new AbortController();
  private readonly moves: JobMoves;
  private readonly fetch: FetchPause;
  private readonly attemptContext: AttemptContext<T>;
  private readonly started: Promise<void>;
  private readonly policyCache = new Map<string, RetryPolicy>();
  /** The attempt number each running job is on, for `job:completed`. */
  private readonly attempts = new WeakMap<Job, number>();
  private lastRetentionAt = -Infinity;
  private retention: Promise<unknown> = Promise.resolve();
  private closed: Promise<void> | undefined;

  constructor(
    readonly name: string,
    handler: Handler<T, R>,
    private readonly options: WorkerOptions<T> = {},
  ) {
    super();
    const { redis, owned } = resolveRedis(options.connection);
    this.redis = redis;
    this.owned = owned;
    this.clock = options.clock ?? systemClock;
    const random = options.random ?? systemRandom;
    this.policy = parseRetryPolicy(options.policy ?? {}, 'worker.policy');
    const classify: ClassifyOptions = parseClassifyOptions(options.classify ?? {});
    this.logger = (options.logger ?? createLogger()).child({ queue: name });
    this.breakerOptions = options.breaker
      ? parseBreakerOptions(options.breaker, 'worker.breaker')
      : undefined;
    this.budgetOptions = options.budget
      ? parseBudgetOptions(options.budget, 'worker.budget')
      : undefined;
    this.gate = new BreakerGate({
      redis,
      queue: name,
      ...(this.breakerOptions ? { breaker: this.breakerOptions } : {}),
      ...(this.budgetOptions ? { budget: this.budgetOptions } : {}),
      clock: this.clock,
      logger: this.logger,
      onTransition: (message) => this.onBreakerTransition(message),
    });
    this.dlq = new DeadLetterQueue(name, {
      connection: redis,
      retention: options.retention,
      clock: this.clock,
      logger: this.logger,
      onTrim: (removed) => this.safeEmit(this.logger, 'dlq:trimmed', { queue: name, ...removed }),
    });
    this.bull = new Worker(name, (job, token) => this.process(job, token), {
      connection: redis,
      concurrency: options.concurrency ?? 1,
      // Started once the breaker's cache is loaded (see run()).
      autorun: false,
      lockDuration: options.lockDurationMs ?? 30_000,
      stalledInterval: options.stalledIntervalMs ?? 30_000,
      // requeue counts crashed attempts itself (attemptsStarted) and dead-letters
      // a job that keeps killing workers; BullMQ must not fail it on its own.
      maxStalledCount: 1_000_000,
    });
    this.moves = new JobMoves(redis, this.bull, name);
    this.fetch = new FetchPause(this.bull, this.clock, this.logger);
    this.attemptContext = {
      queue: name,
      handler: handler as Handler<T, unknown>,
      schema: options.schema,
      classify,
      policyOf: (meta) => (meta.policy ? this.jobPolicy(meta.policy) : this.policy),
      gate: this.gate,
      breakerKeyOf: (job) => this.breakerKeyOf(job),
      budget: this.budgetOptions,
      maxDeferrals: this.breakerOptions?.maxDeferrals ?? Number.POSITIVE_INFINITY,
      attemptTimeoutMs: options.attemptTimeoutMs,
      closing: this.closing.signal,
      clock: this.clock,
      random,
      logger: this.logger,
    };
    // BullMQ emits `completed` once the job is stored as completed.
    this.bull.on('completed', (job, result) => {
      this.safeEmit(this.logger, 'job:completed', {
        queue: name,
        jobId: String(job.id),
        attempt: this.attempts.get(job) ?? job.attemptsStarted,
        result,
      });
    });
    this.bull.on('error', (err) => {
      this.logger.error({ err }, 'worker error');
      if (this.listenerCount('error') > 0) this.safeEmit(this.logger, 'error', err);
    });
    this.started = this.gate.start();
    if (options.autorun ?? true)
      void this.run().catch((err) => this.logger.error({ err }, 'worker stopped'));
  }

  /** Starts processing (when created with `autorun: false`). */
  async run(): Promise<void> {
    await this.started;
    return this.bull.run();
  }

  /** Resolves when the worker is connected, its breaker cache loaded, and ready. */
  async waitUntilReady(): Promise<void> {
    await this.started;
    await this.bull.waitUntilReady();
  }

  /**
   * Stops taking jobs and lets active ones finish; returns within `timeoutMs`
   * whatever handlers, BullMQ or Redis do. Past the deadline the jobs'
   * signals are aborted and connections are closed; jobs still running are
   * left active and come back through stalled-job recovery.
   */
  close({ timeoutMs = 30_000 }: { timeoutMs?: number } = {}): Promise<void> {
    this.closed ??= this.shutdown(timeoutMs);
    return this.closed;
  }

  private async shutdown(timeoutMs: number): Promise<void> {
    const deadline = this.clock.now() + timeoutMs;
    const left = (): number => Math.max(0, deadline - this.clock.now());
    this.fetch.stop();
    // Most of the time for active jobs; the rest to close connections.
    const graceful = await withDeadline(this.bull.close(), Math.floor(timeoutMs * 0.8));
    if (graceful.kind === 'timeout') {
      this.closing.abort(new Error('worker closing'));
      this.logger.warn(
        { timeoutMs },
        'close did not finish in time (jobs still running, or Redis not answering); ' +
          'forcing it: running jobs are left to stalled recovery',
      );
      void this.bull.close(true).catch(() => undefined);
      await withDeadline(
        this.bull.disconnect().catch(() => undefined),
        left(),
      );
    }
    await withDeadline(
      Promise.allSettled([this.retention, this.gate.close(), this.dlq.close()]),
      left(),
    );
    if (this.owned) this.redis.disconnect();
  }

  private async process(job: Job, token: string | undefined): Promise<unknown> {
    if (!token)
      throw new Error('requeue needs a lock token; sandboxed processors are not supported');
    let attempt: Attempt;
    try {
      attempt = await runAttempt(this.attemptContext, job, await this.moves.load(job));
    } catch (err) {
      // requeue's own I/O failed (Redis): the job stays active and comes back
      // through stalled recovery, counted as a stalled attempt.
      this.logger.error({ err, jobId: job.id }, 'could not run the attempt; leaving the job');
      throw new DelayedError();
    }
    return this.apply(job, token, attempt);
  }

  /** Applies an outcome with one fenced move, then announces it. */
  private async apply(job: Job, token: string, attempt: Attempt): Promise<unknown> {
    const jobId = String(job.id);
    const log = (): Logger => this.logger.child({ jobId, attempt: attempt.attempt });
    try {
      switch (attempt.kind) {
        case 'completed':
          // A success after a crash keeps the crashed attempts in the history.
          if (attempt.stateChanged) await this.moves.writeState(job, token, attempt.state);
          this.attempts.set(job, attempt.attempt);
          return attempt.result;
        case 'retry': {
          const now = this.clock.now();
          await this.moves.delay(job, token, attempt.state, attempt.delayMs, now, true);
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
          this.announceBudget(jobId, attempt);
          this.safeEmit(this.logger, 'retry:scheduled', {
            queue: this.name,
            jobId,
            attempt: attempt.attempt,
            delayMs: attempt.delayMs,
            retryAt: attempt.retryAt,
            record,
          });
          break;
        }
        case 'deferred': {
          const now = this.clock.now();
          if (attempt.key === queueBreakerKey) {
            // An isolated circuit stays shut until closed by hand: no timer may resume fetching.
            const isolated = this.gate.stateOf(attempt.key)?.isolated;
            this.fetch.pause(isolated ? Number.POSITIVE_INFINITY : attempt.retryAt);
          }
          await this.moves.delay(job, token, attempt.state, attempt.retryAt - now, now, false);
          this.safeEmit(this.logger, 'job:deferred', {
            queue: this.name,
            jobId,
            untilMs: attempt.retryAt,
            key: attempt.key,
          });
          break;
        }
        case 'dead': {
          const record = await deadLetter(
            {
              queue: this.name,
              moves: this.moves,
              dlq: this.dlq,
              events: this,
              logger: this.logger,
              onDead: this.options.onDead,
            },
            job,
            token,
            attempt,
          );
          if (record) {
            this.announceBudget(jobId, attempt);
            this.scheduleRetention();
          }
          break;
        }
      }
    } catch (err) {
      // The move was refused (the lock is someone else's) or Redis failed: the
      // job is where the last successful move left it.
      log().warn({ err, outcome: attempt.kind }, 'could not move the job; leaving it');
    }
    throw new DelayedError();
  }

  private announceBudget(jobId: string, attempt: Attempt): void {
    if (!attempt.budgetExhausted) return;
    this.logger.warn({ jobId, onEmpty: attempt.budgetExhausted }, 'retry budget empty');
    this.safeEmit(this.logger, 'budget:exhausted', {
      queue: this.name,
      jobId,
      action: attempt.budgetExhausted,
    });
  }

  /** DLQ retention, at most once a second as jobs die, off the job's path. */
  private scheduleRetention(): void {
    const now = this.clock.now();
    if (now - this.lastRetentionAt < 1000) return;
    this.lastRetentionAt = now;
    this.retention = this.dlq
      .applyRetention()
      .catch((err) => this.logger.warn({ err }, 'could not apply the DLQ retention'));
  }

  /** A job's own policy, validated once per distinct policy rather than once per job. */
  private jobPolicy(stored: NonNullable<JobMeta['policy']>): RetryPolicy {
    const key = JSON.stringify(stored);
    let policy = this.policyCache.get(key);
    if (!policy) {
      policy = parseRetryPolicy(stored, 'job.policy');
      if (this.policyCache.size >= 1000) this.policyCache.clear();
      this.policyCache.set(key, policy);
    }
    return policy;
  }

  /** The breaker key of a job: the queue's own, or `breakerKey(job)`'s, or none. */
  private breakerKeyOf(job: RequeueJob<T>): string | undefined {
    if (!this.breakerOptions) return undefined;
    if (!this.options.breakerKey) return queueBreakerKey;
    try {
      return this.options.breakerKey(job);
    } catch (err) {
      // A key function that chokes on one job must not take the worker down: no breaker for it.
      this.logger.warn(
        { err, jobId: job.id },
        'breakerKey threw; running the job without a breaker',
      );
      return undefined;
    }
  }

  private onBreakerTransition(message: BreakerMessage): void {
    const { key, state } = message;
    const event = { queue: this.name, key };
    if (state.phase === 'open') {
      const halfOpenAt = state.halfOpenAt ?? Number.POSITIVE_INFINITY;
      this.logger.warn(
        {
          key,
          halfOpenAt: Number.isFinite(halfOpenAt)
            ? new Date(halfOpenAt).toISOString()
            : 'never (isolated)',
          trips: state.trips,
        },
        'breaker opened',
      );
      this.safeEmit(this.logger, 'breaker:opened', { ...event, halfOpenAt });
      if (key === queueBreakerKey && !this.options.breakerKey) this.fetch.pause(halfOpenAt);
    } else if (state.phase === 'half-open') {
      this.logger.info({ key }, 'breaker half-open');
      this.safeEmit(this.logger, 'breaker:half-open', event);
    } else {
      this.logger.info({ key }, 'breaker closed');
      this.safeEmit(this.logger, 'breaker:closed', event);
      if (key === queueBreakerKey) this.fetch.resume();
    }
  }
}

/** Creates a worker for `name` that runs `handler` with requeue's retries and DLQ. */
export function createWorker<T = unknown, R = unknown>(
  name: string,
  handler: Handler<T, R>,
  options: WorkerOptions<T> = {},
): RequeueWorker<T, R> {
  return new RequeueWorker<T, R>(name, handler, options);
}
