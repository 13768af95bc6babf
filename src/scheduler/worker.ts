import { DelayedError, UnrecoverableError, Worker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { z } from 'zod';
import { formatZodError } from '../config/env.js';
import { deadReasonOf } from '../errors/permanent-error.js';
import { createLogger, type Logger } from '../config/logger.js';
import { classifyError, describeError, parseClassifyOptions } from '../policy/classify/index.js';
import type { ClassifyOptions } from '../policy/classify/classify.js';
import { applyEmptyBudget, decideFailure, type FailureDecision } from '../policy/decide.js';
import {
  parseBreakerOptions,
  type BreakerOptions,
  type BreakerOptionsInput,
} from '../policy/breaker/breaker-options.js';
import {
  parseBudgetOptions,
  successRefund,
  type BudgetOptions,
  type BudgetOptionsInput,
} from '../policy/budget/budget-options.js';
import type { BreakerMessage } from '../redis/breaker-store.js';
import { BreakerGate } from './breaker-gate.js';
import {
  parseRetryPolicy,
  type RetryPolicy,
  type RetryPolicyInput,
} from '../policy/retry-policy.js';
import { resolveRedis, type RedisLike } from '../redis/connection.js';
import { setStateIfLocked } from '../redis/scripts.js';
import { systemClock, systemRandom, type Clock, type Random } from '../util/system.js';
import { DeadLetterQueue, type DeadJobRecord, type Retention } from './dead-letter.js';
import { TypedEmitter, type WorkerEvents } from './events.js';
import {
  emptyJobState,
  parseJobState,
  readJobMeta,
  serializeJobState,
  type AttemptRecord,
  type DeadReason,
  type JobMeta,
  type JobState,
} from './job-state.js';

/** What a handler receives: the job's data, its idempotency key and its attempt number. */
export interface RequeueJob<T = unknown> {
  readonly id: string;
  readonly name: string;
  readonly data: T;
  readonly queue: string;
  /** The producer's idempotency key, if any (e.g. a webhook-id). */
  readonly idempotencyKey: string | undefined;
  /** 1-based attempt number in this life of the job. */
  readonly attempt: number;
  /** The attempts before this one (earlier lives included). */
  readonly history: readonly AttemptRecord[];
  readonly tags: Readonly<Record<string, string>>;
  /** Aborted when the worker is closing with a deadline. */
  readonly signal: AbortSignal;
  /** Adds fields to this attempt's history record (status, latency, a body snippet). */
  annotate(details: Record<string, unknown>): void;
  /** The underlying BullMQ job, for what requeue does not wrap. */
  readonly bullJob: Job;
}

export type Handler<T, R> = (job: RequeueJob<T>) => Promise<R>;

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
  /** Called after a job has been moved to the DLQ. Errors it throws are logged, not raised. */
  onDead?: (record: DeadJobRecord) => void | Promise<void>;
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

/** Thrown through BullMQ after requeue has itself moved the job to the DLQ. */
class DeadLettered extends UnrecoverableError {}

/**
 * Wraps a BullMQ worker: runs the handler, and when it throws, classifies the
 * error and either re-enqueues the job in the delayed set or moves it to the
 * DLQ, keeping the attempt history in the job hash.
 */
export class RequeueWorker<T = unknown, R = unknown> extends TypedEmitter<WorkerEvents> {
  readonly bull: Worker;
  readonly dlq: DeadLetterQueue;
  readonly policy: RetryPolicy;
  private readonly classifyOptions: ClassifyOptions;
  private readonly redis: Redis;
  private readonly owned: boolean;
  private readonly clock: Clock;
  private readonly random: Random;
  private readonly logger: Logger;
  private readonly closing = new AbortController();
  readonly breakerOptions: BreakerOptions | undefined;
  readonly budgetOptions: BudgetOptions | undefined;
  readonly gate: BreakerGate;
  private readonly started: Promise<void>;
  private fetchPaused = false;
  private readonly policyCache = new Map<string, RetryPolicy>();
  /** The attempt number each running job is on (deferrals do not count), for events. */
  private readonly attempts = new WeakMap<Job, number>();
  private resumeTimer: NodeJS.Timeout | undefined;

  constructor(
    readonly name: string,
    private readonly handler: Handler<T, R>,
    private readonly options: WorkerOptions<T> = {},
  ) {
    super();
    const { redis, owned } = resolveRedis(options.connection);
    this.redis = redis;
    this.owned = owned;
    this.clock = options.clock ?? systemClock;
    this.random = options.random ?? systemRandom;
    this.policy = parseRetryPolicy(options.policy ?? {}, 'worker.policy');
    this.classifyOptions = parseClassifyOptions(options.classify ?? {});
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
    });
    this.bull = new Worker(name, (job, token) => this.process(job, token), {
      connection: redis,
      concurrency: options.concurrency ?? 1,
      // Started once the breaker's cache is loaded (see below).
      autorun: false,
      lockDuration: options.lockDurationMs ?? 30_000,
      stalledInterval: options.stalledIntervalMs ?? 30_000,
      // requeue counts crashed attempts itself (attemptsStarted) and dead-letters
      // a job that keeps killing workers; BullMQ must not fail it on its own.
      maxStalledCount: 1_000_000,
    });
    this.bull.on('completed', (job, result) => {
      this.emit('job:completed', {
        queue: name,
        jobId: String(job.id),
        attempt: this.attempts.get(job) ?? job.attemptsStarted,
        result,
      });
    });
    this.started = this.gate.start();
    if (options.autorun ?? true)
      void this.run().catch((err) => this.logger.error({ err }, 'worker stopped'));
    this.bull.on('error', (err) => {
      this.logger.error({ err }, 'worker error');
      if (this.listenerCount('error') > 0) this.emit('error', err);
    });
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
   * Stops taking jobs, lets active ones finish for up to `timeoutMs`, then
   * closes every connection. Jobs still running after that are left active
   * and come back through stalled-job recovery.
   */
  async close({ timeoutMs = 30_000 }: { timeoutMs?: number } = {}): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const graceful = this.bull.close();
    const deadline = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), timeoutMs);
      timer.unref();
    });
    const outcome = await Promise.race([graceful.then(() => 'closed' as const), deadline]);
    clearTimeout(timer);
    if (this.resumeTimer) clearTimeout(this.resumeTimer);
    if (outcome === 'timeout') {
      this.closing.abort();
      this.logger.warn(
        { timeoutMs },
        'active jobs did not finish in time; leaving them to stalled recovery',
      );
      await this.bull.close(true);
    }
    await this.gate.close();
    await this.dlq.close();
    if (this.owned) this.redis.disconnect();
  }

  private async process(job: Job, token: string | undefined): Promise<R> {
    if (!token)
      throw new Error('requeue needs a lock token; sandboxed processors are not supported');
    const meta = readJobMeta(job.opts);
    const state = await this.loadState(job, meta);
    const attempt = Math.max(1, job.attemptsStarted - state.deferrals);
    this.attempts.set(job, attempt);
    // A child logger per job costs more than the rest of the happy path: make it only when used.
    const log = (): Logger => this.logger.child({ jobId: job.id, attempt });

    if (state.dead) {
      // A crash came between marking this job dead and removing it: finish the move.
      return this.deadLetter(
        job,
        token,
        meta,
        state,
        state.dead.reason,
        state.dead.message,
        state.dead.attempts ?? attempt - 1,
      );
    }
    const policy = meta.policy ? this.jobPolicy(meta.policy) : this.policy;
    const stalled = this.recordStalls(state, attempt);
    if (attempt > policy.maxAttempts) {
      // Earlier attempts died with their worker; this one would exceed the limit.
      return this.deadLetter(
        job,
        token,
        meta,
        state,
        'max-attempts',
        'worker died during the last attempt',
        attempt - 1,
      );
    }

    let data = job.data as T;
    if (this.options.schema) {
      const parsed = this.options.schema.safeParse(job.data);
      if (!parsed.success) {
        const message = formatZodError(parsed.error, 'data');
        log().warn({ reason: message }, 'invalid payload; dead-lettering');
        return this.deadLetter(job, token, meta, state, 'invalid-payload', message, attempt);
      }
      data = parsed.data;
    }

    const startedAt = this.clock.now();
    let details: Record<string, unknown> | undefined;
    const handle: RequeueJob<T> = Object.freeze({
      id: String(job.id),
      name: job.name,
      data,
      queue: this.name,
      idempotencyKey: meta.key,
      attempt,
      history: state.history,
      tags: meta.tags ?? {},
      signal: this.closing.signal,
      annotate: (extra: Record<string, unknown>) => {
        details = { ...details, ...extra };
      },
      bullJob: job,
    });
    const breakerKey = this.breakerKeyOf(handle);
    let probeId: string | undefined;
    if (breakerKey !== undefined) {
      const checked = this.gate.check(breakerKey, () => `${job.id}:${job.attemptsStarted}`);
      const admission = checked instanceof Promise ? await checked : checked;
      if (admission.kind === 'reject')
        return this.defer(job, token, meta, state, attempt, breakerKey, admission.retryAt);
      if (admission.kind === 'probe') probeId = admission.probeId;
    }
    let result: R;
    try {
      result = await this.handler(handle);
    } catch (err) {
      return this.onFailure(
        job,
        token,
        meta,
        state,
        policy,
        attempt,
        startedAt,
        err,
        details,
        log(),
        breakerKey,
        probeId,
      );
    }
    if (breakerKey !== undefined)
      this.gate.outcome(breakerKey, true, probeId)?.catch((err) => log().warn({ err }, 'breaker'));
    if (this.budgetOptions)
      this.gate.settle(successRefund(this.budgetOptions, attempt, state.lastRetryCost));
    // A success after a crash keeps the crashed attempts in the job's history.
    if (stalled)
      await setStateIfLocked(this.redis, this.jobKey(job), token, serializeJobState(state));
    return result;
  }

  /** A job's own policy, validated once per distinct policy rather than once per job. */
  private jobPolicy(stored: Record<string, unknown>): RetryPolicy {
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

  /**
   * Puts a job back until its circuit may let it through, without consuming
   * an attempt and without counting as a failure; bounded by `maxDeferrals`.
   */
  private async defer(
    job: Job,
    token: string,
    meta: JobMeta,
    state: JobState,
    attempt: number,
    key: string,
    retryAt: number,
  ): Promise<never> {
    const now = this.clock.now();
    state.deferrals += 1;
    const max = this.breakerOptions?.maxDeferrals ?? Infinity;
    if (state.deferrals > max) {
      return this.deadLetter(
        job,
        token,
        meta,
        state,
        'max-deferrals',
        `circuit ${key} stayed open through ${max} deferrals`,
        attempt - 1,
      );
    }
    const delayMs = Math.max(0, retryAt - now);
    const last = state.history.at(-1);
    if (last?.outcome === 'deferred' && last.replay === state.replays) {
      // Consecutive deferrals share one record, so an outage does not bloat the history.
      last.details = { ...last.details, count: Number(last.details?.count ?? 1) + 1 };
      last.retryAt = retryAt;
      last.delayMs = delayMs;
    } else {
      state.history.push({
        attempt,
        replay: state.replays,
        startedAt: now,
        outcome: 'deferred',
        decision: 'deferred',
        delayMs,
        retryAt,
        details: { breakerKey: key, count: 1 },
      });
    }
    if (key === queueBreakerKey) {
      // An isolated circuit stays shut until closed by hand: no timer may resume fetching.
      this.pauseFetching(this.gate.stateOf(key)?.isolated ? Number.POSITIVE_INFINITY : retryAt);
    }
    try {
      const backend = (job as unknown as { backend: JobBackend }).backend;
      await backend.moveToDelayed(String(job.id), now, Math.round(delayMs), token, {
        skipAttempt: true,
        fieldsToUpdate: { rq: serializeJobState(state) },
      });
    } catch (err) {
      this.logger.warn(
        { err, jobId: job.id },
        'could not defer the job; the job is back in the queue',
      );
    }
    this.emit('job:deferred', { queue: this.name, jobId: String(job.id), untilMs: retryAt, key });
    throw new DelayedError();
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
      this.emit('breaker:opened', { ...event, halfOpenAt });
      if (key === queueBreakerKey && !this.options.breakerKey) this.pauseFetching(halfOpenAt);
    } else if (state.phase === 'half-open') {
      this.logger.info({ key }, 'breaker half-open');
      this.emit('breaker:half-open', event);
    } else {
      this.logger.info({ key }, 'breaker closed');
      this.emit('breaker:closed', event);
      if (key === queueBreakerKey) this.resumeFetching();
    }
  }

  /** Stops fetching jobs until `until` (or a transition says otherwise). */
  private pauseFetching(until: number): void {
    if (this.resumeTimer) clearTimeout(this.resumeTimer);
    if (!this.fetchPaused) {
      this.fetchPaused = true;
      void this.bull.pause(true).catch((err) => this.logger.warn({ err }, 'could not pause'));
    }
    if (Number.isFinite(until)) {
      this.resumeTimer = setTimeout(
        () => this.resumeFetching(),
        Math.max(0, until - this.clock.now()),
      );
      this.resumeTimer.unref();
    }
  }

  private resumeFetching(): void {
    if (this.resumeTimer) clearTimeout(this.resumeTimer);
    this.resumeTimer = undefined;
    if (!this.fetchPaused || this.bull.closing) return;
    this.fetchPaused = false;
    void this.bull.resume();
  }

  private async loadState(job: Job, meta: JobMeta): Promise<JobState> {
    // The first attempt of a job has no stored state: skip the round trip.
    if (job.attemptsStarted > 1) {
      const stored = parseJobState(await this.redis.hget(this.jobKey(job), 'rq'));
      if (stored) return stored;
    }
    return meta.carried ? structuredClone(meta.carried) : emptyJobState();
  }

  /** Adds a `stalled` record for each attempt that died with its worker. */
  private recordStalls(state: JobState, attempt: number): boolean {
    const life = state.history.filter(
      (r) => r.replay === state.replays && r.outcome !== 'deferred',
    );
    const first = life.length + 1;
    for (let missing = first; missing < attempt; missing += 1) {
      state.history.push({
        attempt: missing,
        replay: state.replays,
        startedAt: this.clock.now(),
        outcome: 'stalled',
        decision: 'retry',
        error: { class: 'Stalled', message: 'the worker stopped during this attempt' },
      });
    }
    return first < attempt;
  }

  private async onFailure(
    job: Job,
    token: string,
    meta: JobMeta,
    state: JobState,
    policy: RetryPolicy,
    attempt: number,
    startedAt: number,
    err: unknown,
    details: Record<string, unknown> | undefined,
    log: Logger,
    breakerKey: string | undefined,
    probeId: string | undefined,
  ): Promise<never> {
    const now = this.clock.now();
    const classification = classifyError(err, this.classifyOptions, now);
    if (breakerKey !== undefined) {
      // Only failures that speak of the dependency's health count; a probe that
      // got a permanent answer shows the dependency is answering.
      const healthy = classification.kind === 'permanent';
      if (!healthy || probeId !== undefined) {
        this.gate
          .outcome(breakerKey, healthy, probeId)
          ?.catch((e) => log.warn({ err: e }, 'breaker'));
      }
    }
    this.gate.settle(0);
    // The window counts from the first failure, not from when that attempt began.
    const firstFailedAt = state.firstFailedAt ?? now;
    let decision: FailureDecision = decideFailure({
      classification,
      policy,
      attemptsMade: attempt,
      previousDelayMs: state.previousDelayMs,
      firstFailedAt,
      now,
      random: this.random,
    });
    if (decision.action === 'retry' && this.budgetOptions) {
      const { granted, cost } = await this.gate.takeRetry(
        classification.kind === 'retry' && classification.timeout,
      );
      // A denied take costs nothing, so its success must refund nothing either.
      state.lastRetryCost = cost;
      if (!granted) {
        decision = applyEmptyBudget(decision, policy, now, this.budgetOptions.onEmpty);
        log.warn({ onEmpty: this.budgetOptions.onEmpty }, 'retry budget empty');
        this.emit('budget:exhausted', {
          queue: this.name,
          jobId: String(job.id),
          action: this.budgetOptions.onEmpty,
        });
      }
    }
    const error = describeError(err);
    const record: AttemptRecord = {
      attempt,
      replay: state.replays,
      startedAt,
      finishedAt: now,
      outcome: 'failed',
      error,
      classification: classification.reason,
      decision: decision.action,
      ...(details ? { details } : {}),
    };
    state.firstFailedAt = firstFailedAt;
    if (decision.action === 'dead-letter') {
      decision.reason = deadReasonOf(err) ?? decision.reason;
      record.deadReason = decision.reason;
      state.history.push(record);
      return this.deadLetter(job, token, meta, state, decision.reason, error.message, attempt);
    }
    record.delayMs = decision.delayMs;
    record.retryAt = decision.retryAt;
    record.delaySource = decision.source;
    state.history.push(record);
    state.previousDelayMs = decision.delayMs;
    try {
      await this.moveToDelayed(job, token, state, decision.delayMs, now);
    } catch (moveErr) {
      // Lost the lock (the job stalled and went back to the queue): whoever has it now decides.
      log.warn({ err: moveErr }, 'could not schedule the retry; the job is back in the queue');
      throw new DelayedError();
    }
    log.info(
      {
        error: {
          class: error.class,
          message: error.message,
          status: error.status,
          code: error.code,
        },
        delayMs: decision.delayMs,
        retryAt: new Date(decision.retryAt).toISOString(),
        source: decision.source,
      },
      'retry scheduled',
    );
    this.emit('retry:scheduled', {
      queue: this.name,
      jobId: String(job.id),
      attempt,
      delayMs: decision.delayMs,
      retryAt: decision.retryAt,
      record,
    });
    throw new DelayedError();
  }

  /** Moves the job to the delayed set and writes its state, in one atomic step. */
  private async moveToDelayed(
    job: Job,
    token: string,
    state: JobState,
    delayMs: number,
    now: number,
  ): Promise<void> {
    const backend = (job as unknown as { backend: JobBackend }).backend;
    await backend.moveToDelayed(String(job.id), now, Math.max(0, Math.round(delayMs)), token, {
      skipAttempt: false,
      fieldsToUpdate: { rq: serializeJobState(state) },
    });
  }

  /**
   * Moves a job to the DLQ, crash-safe in three idempotent steps: mark it dead
   * in its hash (while holding its lock), store it in the DLQ under the same
   * id, remove it from the source queue. A crash between steps leaves the
   * job marked; whoever picks it up next finishes the move without running
   * the handler again.
   */
  private async deadLetter(
    job: Job,
    token: string,
    meta: JobMeta,
    state: JobState,
    reason: DeadReason,
    message: string,
    attempts: number,
  ): Promise<never> {
    const deadAt = state.dead?.deadAt ?? this.clock.now();
    state.dead = { reason, message, deadAt, attempts };
    const marked = await setStateIfLocked(
      this.redis,
      this.jobKey(job),
      token,
      serializeJobState(state),
    );
    if (!marked) {
      this.logger.warn(
        { jobId: job.id },
        'lost the lock before dead-lettering; another worker has the job',
      );
      throw new DelayedError();
    }
    const { rq: _rq, ...originalOpts } = job.opts as Record<string, unknown>;
    const record: DeadJobRecord = {
      source: this.name,
      id: String(job.id),
      name: job.name,
      data: job.data,
      opts: { ...originalOpts, rq: { ...meta, carried: undefined } },
      ...(meta.key !== undefined ? { idempotencyKey: meta.key } : {}),
      reason,
      message,
      attempts,
      history: state.history,
      ...(state.firstFailedAt !== undefined ? { firstFailedAt: state.firstFailedAt } : {}),
      deadAt,
      replays: state.replays,
    };
    try {
      await this.dlq.put(record);
    } catch (putErr) {
      // Leave the job active and marked: stalled recovery brings it back and the move resumes.
      this.logger.error(
        { err: putErr, jobId: job.id },
        'could not store the dead job; will resume after recovery',
      );
      throw new DelayedError();
    }
    this.logger.warn({ jobId: job.id, reason, attempts, message }, 'job dead-lettered');
    this.emit('job:dead-lettered', { queue: this.name, jobId: record.id, record });
    if (this.options.onDead) {
      try {
        await this.options.onDead(record);
      } catch (hookErr) {
        this.logger.error({ err: hookErr, jobId: job.id }, 'death hook failed');
      }
    }
    // BullMQ removes the job from the source as it fails it.
    job.opts.removeOnFail = true;
    throw new DeadLettered(`dead-lettered: ${reason}`);
  }

  private jobKey(job: Job): string {
    return this.bull.toKey(String(job.id));
  }
}

/** The part of BullMQ's queue backend requeue calls to move a job with its state in one step. */
interface JobBackend {
  moveToDelayed(
    jobId: string,
    timestamp: number,
    delay: number,
    token: string,
    opts: { skipAttempt: boolean; fieldsToUpdate: Record<string, string> },
  ): Promise<unknown>;
}

/** Creates a worker for `name` that runs `handler` with requeue's retries and DLQ. */
export function createWorker<T = unknown, R = unknown>(
  name: string,
  handler: Handler<T, R>,
  options: WorkerOptions<T> = {},
): RequeueWorker<T, R> {
  return new RequeueWorker<T, R>(name, handler, options);
}
