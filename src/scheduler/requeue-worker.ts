import type { Job } from 'bullmq';
import { libraryLogger, type Logger } from '../config/logger.js';
import type { BreakerOptions } from '../policy/breaker/breaker-options.js';
import type { BudgetOptions } from '../policy/budget/budget-options.js';
import { StoredResult } from '../policy/outcome.js';
import type { RetryPolicy } from '../policy/retry-policy.js';
import { checkConnectionKind } from '../redis/check-redis.js';
import { isCluster, resolveRedis, type RedisClient } from '../redis/connection.js';
import { bullPrefix, requeueKeys } from '../redis/keys.js';
import { withDeadline } from '../util/lifecycle.js';
import { systemClock, systemRandom, type Clock } from '../util/system.js';
import type { Attempt, AttemptContext, Handler } from './attempt/context.js';
import { runAttempt } from './attempt/run-attempt.js';
import { announceTransition, BreakerGate, queueBreakerKey } from './breaker-gate.js';
import { DeadLetterQueue } from './dlq/dead-letter-queue.js';
import { applyOutcome, type ApplyContext } from './apply-outcome.js';
import { TypedEmitter, type WorkerEvents } from './events.js';
import { ClockWatch, type ClockStatus } from './clock-watch.js';
import { childFailure, processDeferredFailures } from './bullmq/deferred-failure.js';
import { FetchPause } from './bullmq/fetch-pause.js';
import { trimFairState } from './bullmq/fair-dispatch.js';
import { BullWorker } from './bullmq/bull-worker.js';
import { delayedError } from './bullmq/bull-queue.js';
import { completedAttemptOf, holdJob, noteCompletedAttempt } from './bullmq/held-job.js';
import type { HeldJob } from './bullmq/held-job.js';
import { assertSupportedBullmq } from './bullmq/version.js';
import { JobMoves, mayHaveState, type StoredState } from './bullmq/job-moves.js';
import { JobOptions } from './job-options.js';
import { KeyGate } from './key-gate.js';
import { RetentionKeeper } from './dlq/retention-keeper.js';
import { adaptiveLimits, type KeyLimits } from './key-limits.js';
import { workerLimit, type WorkerLimit } from './worker-limit.js';
import { fetchOnRedisTime } from './bullmq/redis-time-fetch.js';
import { retryPromoterFor, type RetryPromoter } from './bullmq/retry-promoter.js';
import type { WorkerOptions } from './worker-options.js';
import { parseWorkerOptions } from './worker-config.js';

export type { Handler, RequeueJob } from './attempt/context.js';
export type { WorkerOptions } from './worker-options.js';
export { queueBreakerKey } from './breaker-gate.js';

/** What a job on its first attempt has stored: nothing yet. */
const firstLife = Object.freeze({ state: undefined, life: 0, lifeOffset: 0 });

/**
 * A requeue worker: a BullMQ worker whose processor runs one attempt
 * (`attempt/run-attempt.ts`) and applies its outcome with one fenced move (`job-moves.ts`,
 * `dlq/dead-letter-move.ts`), announcing it only once it is stored. This class wires
 * those parts together and owns the lifecycle.
 */
export class RequeueWorker<T = unknown, R = unknown> extends TypedEmitter<WorkerEvents> {
  /** BullMQ's worker underneath. @remarks escape hatch: not covered by requeue's guarantees. */
  readonly bull: BullWorker;
  readonly dlq: DeadLetterQueue;
  readonly policy: RetryPolicy;
  readonly breakerOptions: BreakerOptions | undefined;
  readonly budgetOptions: BudgetOptions | undefined;
  readonly gate: BreakerGate;
  /** Bulkheads, pauses and parking per key. */
  readonly keys: KeyGate;
  /** The fleet's adaptive concurrency limits per key, when `adaptiveConcurrency` is on. */
  readonly limits: KeyLimits | undefined;
  /** The worker's own limit learned from latency (`concurrencyLimit`), when on. */
  readonly workerLimit: WorkerLimit | undefined;
  private readonly redis: RedisClient;
  private readonly owned: boolean;
  private readonly clock: Clock;
  private readonly clockWatch: ClockWatch;
  private readonly logger: Logger;
  /** The running attempts' controllers: closing past the deadline aborts them. */
  private readonly running = new Set<AbortController>();
  private closingReason: Error | undefined;
  private readonly moves: JobMoves;
  private readonly fetch: FetchPause;
  private readonly attemptContext: AttemptContext<T>;
  private readonly applyContext: ApplyContext;
  private readonly started: Promise<void>;
  private readonly retention: RetentionKeeper;
  /** Moves due retries ahead of new work (`retryOrder: 'first'`); none with `'fifo'`. */
  private readonly promoter: RetryPromoter | undefined;
  private closed: Promise<void> | undefined;

  constructor(
    readonly name: string,
    handler: Handler<T, R>,
    private readonly options: WorkerOptions<T> = {},
  ) {
    super();
    const parsed = parseWorkerOptions(name, options);
    // Before a connection is opened: a refused BullMQ leaves none behind.
    assertSupportedBullmq();
    const { redis, owned } = resolveRedis(options.connection);
    this.redis = redis;
    this.owned = owned;
    const random = options.random ?? systemRandom;
    this.policy = parsed.policy;
    const classify = parsed.classify;
    this.logger = libraryLogger(options.logger).child({ queue: name });
    // Every time this worker reads (due times, starts, BullMQ's fetch) is Redis's, as measured.
    this.clockWatch = new ClockWatch({
      redis,
      clock: options.clock ?? systemClock,
      logger: this.logger,
      maxSkewMs: options.maxClockSkewMs ?? 5_000,
      intervalMs: options.clockCheckIntervalMs ?? 30_000,
      onRefuse: (refuse) => (refuse ? this.fetch.hold() : this.fetch.release()),
    });
    this.clock = this.clockWatch.clock;
    this.breakerOptions = parsed.breaker;
    this.budgetOptions = parsed.budget;
    this.gate = new BreakerGate({
      redis,
      queue: name,
      ...(this.breakerOptions ? { breaker: this.breakerOptions } : {}),
      ...(this.budgetOptions ? { budget: this.budgetOptions } : {}),
      clock: this.clock,
      logger: this.logger,
      onTransition: (message) =>
        announceTransition(
          {
            queue: name,
            queueWide: !options.breakerKey,
            logger: this.logger,
            events: this,
            fetch: this.fetch,
          },
          message,
        ),
    });
    this.keys = new KeyGate({ redis, queue: name, clock: this.clock, logger: this.logger });
    this.limits = adaptiveLimits(parsed.adaptive, options.attemptTimeoutMs, {
      redis,
      queue: name,
      clock: this.clock,
      logger: this.logger,
      paused: (key) => this.keys.pausedUntil(key) !== undefined,
    });
    this.dlq = new DeadLetterQueue(name, {
      connection: redis,
      prefix: options.prefix,
      retention: options.retention,
      clock: this.clock,
      logger: this.logger,
      onTrim: (removed) => this.safeEmit(this.logger, 'dlq:trimmed', { queue: name, ...removed }),
    });
    this.retention = new RetentionKeeper({
      pass: (signal) => this.dlq.retentionPass(signal),
      clock: this.clock,
      logger: this.logger,
      intervalMs: this.dlq.retention.intervalMs,
    });
    const concurrency = options.concurrency ?? 1;
    this.bull = new BullWorker(name, (job, token) => this.process(job, token), {
      connection: redis,
      prefix: bullPrefix(name, isCluster(redis), options.prefix),
      ...(options.telemetry ? { telemetry: options.telemetry } : {}),
      concurrency,
      // Started once the breaker's cache is loaded (see run()).
      autorun: false,
      lockDuration: options.lockDurationMs ?? 30_000,
      stalledInterval: options.stalledIntervalMs ?? 30_000,
      // requeue counts crashed attempts and dead-letters a job that keeps killing workers.
      maxStalledCount: 1_000_000,
    });
    this.workerLimit = workerLimit(this.bull, parsed.concurrencyLimit, concurrency);
    this.moves = new JobMoves(redis, this.bull, name);
    this.keys.parkWith(this.moves, this.bull.opts.prefix ?? 'bull');
    this.promoter = retryPromoterFor(parsed.order, {
      redis,
      keys: this.moves.keys,
      tailKey: requeueKeys(name).retryTail,
      clock: this.clock,
      logger: this.logger,
      holdAboveJobs: concurrency,
      fetching: () => !this.bull.isPaused() && !this.bull.closing,
    });
    const promoter = this.promoter;
    fetchOnRedisTime(this.bull, this.clock, promoter && ((now) => promoter.beforeFetch(now)));
    processDeferredFailures(this.bull);
    this.fetch = new FetchPause(this.bull, this.clock, this.logger);
    const perJob = new JobOptions(options, this.policy, this.logger, redis, name);
    this.attemptContext = {
      queue: name,
      handler: handler as Handler<T, unknown>,
      schema: options.schema,
      classify,
      policyOf: (meta) => perJob.policyOf(meta),
      gate: this.gate,
      keys: this.keys,
      keyOf: (job) => perJob.keyOf(job),
      breakerKeyOf: (key) =>
        !this.breakerOptions ? undefined : this.options.breakerKey ? key : queueBreakerKey,
      keyConcurrency: (job) => perJob.keyConcurrencyOf(job),
      limits: this.limits,
      workerLimit: this.workerLimit,
      rateSlot: perJob.rateSlot,
      budget: this.budgetOptions,
      maxDeferrals: this.breakerOptions?.maxDeferrals ?? Number.POSITIVE_INFINITY,
      attemptTimeoutMs: options.attemptTimeoutMs,
      track: (controller) => {
        if (this.closingReason) controller.abort(this.closingReason);
        this.running.add(controller);
        return () => this.running.delete(controller);
      },
      clock: this.clock,
      random,
      logger: this.logger,
      onReturn: (job, attempt, scheduledAt, startedAt) =>
        this.safeEmit(this.logger, 'retry:started', {
          queue: name,
          jobId: String(job.id),
          attempt,
          scheduledAt,
          startedAt,
        }),
      apply: (job, token, attempt) => this.apply(job, token, attempt),
      leave: (err, job) => this.leave(err, job),
    };
    this.applyContext = {
      queue: name,
      queueBreakerKey,
      moves: this.moves,
      dlq: this.dlq,
      gate: this.gate,
      keys: this.keys,
      fetch: this.fetch,
      events: this,
      logger: this.logger,
      clock: this.clock,
      onDead: options.onDead,
      afterDeath: () => this.retention.noteDeath(),
      budgetOnEmpty: this.budgetOptions?.onEmpty ?? 'delay',
    };
    // BullMQ emits `completed` once the job is stored as completed.
    this.bull.on('completed', (job, result) => {
      // No payload built for no one.
      if (this.listenerCount('job:completed') === 0) return;
      this.safeEmit(this.logger, 'job:completed', {
        queue: name,
        jobId: String(job.id),
        attempt: completedAttemptOf(job),
        // The handler's own value: what was stored is its one serialisation.
        result: result instanceof StoredResult ? result.value : result,
        enqueuedAt: job.timestamp,
        finishedAt: job.finishedOn ?? this.clock.now(),
      });
    });
    this.bull.on('drained', () => {
      trimFairState(redis, name, this.bull.opts.prefix ?? 'bull').catch((err: unknown) =>
        this.logger.debug({ err }, 'could not trim fair-dispatch state'),
      );
    });
    this.bull.on('error', (err) => {
      this.logger.error({ err }, 'worker error');
      if (this.listenerCount('error') > 0) this.safeEmit(this.logger, 'error', err);
    });
    this.started = checkConnectionKind(redis, 'worker.connection')
      .then(() =>
        Promise.all([
          this.gate.start(),
          options.breakerKey ? this.keys.start() : undefined,
          this.clockWatch.check(),
        ]),
      )
      .then(() => undefined);
    if (options.autorun ?? true)
      void this.run().catch((err) => this.logger.error({ err }, 'worker stopped'));
  }

  /** Starts processing (when created with `autorun: false`). */
  async run(): Promise<void> {
    await this.started;
    this.retention.start();
    this.clockWatch.start();
    this.promoter?.start();
    this.keys.parking?.start();
    return this.bull.run();
  }

  /** Whether the worker is taking jobs (started and not closing). */
  isRunning = (): boolean => this.bull.isRunning();

  /** This worker's clock against Redis's, as last measured (for metrics). */
  clockStatus(): ClockStatus {
    return this.clockWatch.status();
  }

  /** Resolves when the worker is connected, its breaker cache loaded, and ready. */
  async waitUntilReady(): Promise<void> {
    await this.started;
    await this.bull.waitUntilReady();
  }

  /**
   * Stops taking jobs and lets active ones finish; returns within `timeoutMs`
   * whatever handlers, BullMQ or Redis do. Past the deadline the jobs'
   * signals are aborted and BullMQ's fetch connection is closed; jobs still
   * running are left active and come back through stalled-job recovery. A
   * connection the caller passed stays open: the worker ends only its own.
   */
  close({ timeoutMs = 30_000 }: { timeoutMs?: number } = {}): Promise<void> {
    this.closed ??= this.shutdown(timeoutMs);
    return this.closed;
  }

  private async shutdown(timeoutMs: number): Promise<void> {
    const deadline = this.clock.now() + timeoutMs;
    const left = (): number => Math.max(0, deadline - this.clock.now());
    this.fetch.stop();
    this.clockWatch.stop();
    const promoting = this.promoter?.stop();
    // Most of the time for active jobs; the rest to close connections.
    const graceful = await withDeadline(this.bull.close(), Math.floor(timeoutMs * 0.8));
    if (graceful.kind === 'timeout') {
      this.closingReason = new Error('worker closing');
      for (const controller of this.running) controller.abort(this.closingReason);
      this.logger.warn(
        { timeoutMs },
        'close did not finish in time (jobs still running, or Redis not answering); ' +
          'forcing it: running jobs are left to stalled recovery',
      );
      void this.bull.close(true).catch(() => undefined);
      // Not BullMQ's `disconnect()`: it would end the connection a caller passed.
      await withDeadline(
        this.bull.disconnectFetch().catch(() => undefined),
        left(),
      );
    }
    await withDeadline(
      Promise.allSettled([
        this.retention.stop(),
        promoting,
        this.gate.close(),
        this.keys.close(),
        this.limits?.close(),
        this.dlq.close(),
      ]),
      left(),
    );
    if (this.owned) this.redis.disconnect();
  }

  /** BullMQ's processor: one attempt, its outcome applied (see `runAttempt`). */
  private process(job: Job, token: string | undefined): unknown {
    this.promoter?.noteFetched();
    if (!token)
      throw new Error('requeue needs a lock token; sandboxed processors are not supported');
    // A flow's parent whose child died with failParentOnFailure: dead-lettered, not run.
    if (job.deferredFailure) return this.processChildFailure(job, token);
    // A first attempt has no stored state: no read, and no promise to wait on.
    if (!mayHaveState(job)) return runAttempt(this.attemptContext, job, token, firstLife);
    return this.processStored(job, token);
  }

  private async processStored(job: Job, token: string): Promise<unknown> {
    return runAttempt(this.attemptContext, job, token, await this.load(job, token));
  }

  private async processChildFailure(job: Job, token: string): Promise<unknown> {
    const stored = mayHaveState(job) ? await this.load(job, token) : firstLife;
    return this.apply(holdJob(job), token, childFailure(job, stored, this.clock.now()));
  }

  /** The job's stored state; a failed read leaves the job (see {@link leave}). */
  private async load(job: Job, token: string): Promise<StoredState> {
    try {
      return await this.moves.load(job, token);
    } catch (err) {
      throw this.leave(err, job);
    }
  }

  /** Applies an attempt's outcome; returns what BullMQ completes the job with. */
  private apply(job: HeldJob, token: string, attempt: Attempt): unknown {
    if (attempt.kind === 'completed') {
      noteCompletedAttempt(job, attempt.attempt);
      // Nothing to store before BullMQ completes the job (its own fenced move).
      if (!attempt.stateChanged) return attempt.result;
    } else if (this.closingReason) {
      // Past the close's deadline (aborted, not failed by its work): left to stalled recovery.
      return Promise.reject(delayedError('left to stalled recovery'));
    }
    return applyOutcome(this.applyContext, job, token, attempt);
  }

  /** requeue's own I/O (Redis) or a per-job option function failed: left to stalled recovery. */
  private leave(err: unknown, job: { readonly id?: string | undefined }): Error {
    this.logger.error({ err, jobId: job.id }, 'could not run the attempt; leaving the job');
    return delayedError('left to stalled recovery');
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
