import type { Job } from 'bullmq';
import type { z } from 'zod';
import { formatZodError } from '../util/parse-config.js';
import type { Logger } from '../config/logger.js';
import { AttemptTimeoutError } from '../errors/attempt-timeout-error.js';
import { deadReasonOf } from '../errors/permanent-error.js';
import {
  attemptOf,
  recordDeferral,
  recordFailure,
  recordStalls,
  recordSuccess,
  type Death,
  type DeferralReason,
} from '../policy/attempt-history.js';
import type { BudgetOptions } from '../policy/budget/budget-options.js';
import { successRefund } from '../policy/budget/budget-options.js';
import { classifyError, describeError } from '../policy/classify/index.js';
import { countsAgainst } from '../policy/breaker/job-count.js';
import type { Classification, ClassifyOptions } from '../policy/classify/classify.js';
import { applyEmptyBudget, decideFailure, type FailureDecision } from '../policy/decide.js';
import {
  changeState,
  readJobMeta,
  stateForLife,
  type AttemptRecord,
  type JobMeta,
  type JobState,
} from '../policy/job-state.js';
import { consecutiveDeferrals, deferredUntil } from '../policy/deferral.js';
import { storableDetails, storableResult, type AttemptOutcome } from '../policy/outcome.js';
import type { RetryPolicy } from '../policy/retry-policy.js';
import type { Clock, Random } from '../util/system.js';
import type { BreakerGate } from './breaker-gate.js';
import type { KeyGate } from './key-gate.js';
import type { KeyLimits, Lease } from './key-limits.js';
import type { StoredState } from './bullmq/job-moves.js';

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
   * for a job without a key. A 429, or a 503 with `Retry-After`, pauses the
   * key by itself.
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
  /** The fleet's adaptive limit per key (`adaptiveConcurrency`), when on. */
  readonly limits: KeyLimits | undefined;
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
  readonly apply: (job: Job, token: string, attempt: Attempt) => unknown;
  /**
   * What to throw when requeue's own I/O failed (Redis) or a per-job option
   * function threw: the job stays active and comes back through stalled
   * recovery.
   */
  readonly leave: (err: unknown, job: Job) => Error;
}

/** An outcome with what the worker needs to announce it. */
export type Attempt = AttemptOutcome & {
  attempt: number;
  meta: JobMeta;
  life: number;
  /** The retry budget turned this retry down (announced after the move). */
  budgetExhausted?: 'delay-to-cap' | 'dead-letter';
};

/**
 * The handler's view of one attempt (a {@link RequeueJob}), and what the
 * handler tells requeue during it. A class rather than an object literal:
 * one per job, so its shape is built once. Its methods use `this`, like
 * BullMQ's own `Job`.
 */
class AttemptHandle<T> implements RequeueJob<T> {
  readonly id: string;
  readonly name: string;
  readonly queue: string;
  readonly idempotencyKey: string | undefined;
  readonly tags: Readonly<Record<string, string>>;
  #details: Record<string, unknown> | undefined = undefined;
  #pauseUntil: number | undefined = undefined;
  // The job's AbortController is made when something needs it (the handler
  // reads `signal`, or the attempt times out): most attempts never do.
  #controller: AbortController | undefined = undefined;
  #untrack: (() => void) | undefined = undefined;
  readonly #track: (controller: AbortController) => () => void;

  constructor(
    ctx: AttemptContext<T>,
    readonly bullJob: Job,
    readonly data: T,
    meta: JobMeta,
    readonly attempt: number,
    readonly replays: number,
    readonly history: readonly AttemptRecord[],
  ) {
    this.id = String(bullJob.id);
    this.name = bullJob.name;
    this.queue = ctx.queue;
    this.idempotencyKey = meta.key;
    this.tags = meta.tags ?? noTags;
    this.#track = ctx.track;
  }

  get signal(): AbortSignal {
    return this.abortable().signal;
  }

  annotate(extra: Record<string, unknown>): void {
    // A new object each time (what was stored stays as it was), built with
    // Object.assign: a spread copy that adds fields is slow on Node 20.
    const merged: Record<string, unknown> = Object.assign({}, this.#details);
    try {
      Object.assign(merged, extra);
    } catch {
      merged['annotateError'] = 'annotate() needs an object';
    }
    this.#details = merged;
  }

  pauseKey(untilMs: number): void {
    if (Number.isFinite(untilMs)) this.#pauseUntil = Math.max(this.#pauseUntil ?? 0, untilMs);
  }

  /** The attempt's controller, made (and registered with the worker) on first use. */
  abortable(): AbortController {
    if (!this.#controller) {
      this.#controller = new AbortController();
      this.#untrack = this.#track(this.#controller);
    }
    return this.#controller;
  }

  /** The attempt is over: closing the worker no longer needs to abort it. */
  forget(): void {
    this.#untrack?.();
  }

  static detailsOf<T>(handle: AttemptHandle<T>): Record<string, unknown> | undefined {
    return handle.#details;
  }

  static pauseUntilOf<T>(handle: AttemptHandle<T>): number | undefined {
    return handle.#pauseUntil;
  }
}

const noTags: Readonly<Record<string, string>> = Object.freeze({});

/**
 * Runs one attempt of a job and applies what became of it (`ctx.apply`);
 * returns what BullMQ's processor returns. Whatever the handler does —
 * returns anything, throws anything, hangs — its outcome is an
 * {@link AttemptOutcome}; the only other failures are requeue's own I/O
 * failing (the breaker or budget in Redis) or a per-job option function
 * throwing, which are thrown as `ctx.leave` makes them (the job is left to
 * stalled recovery).
 *
 * A job that completes runs in one async frame (`admitAndRun`), from the
 * handler's call to BullMQ's completion: every frame and object on this path
 * is paid by every job (`bench/RESULTS.md`).
 */
export function runAttempt<T>(
  ctx: AttemptContext<T>,
  job: Job,
  token: string,
  stored: StoredState,
): unknown {
  let admitted: Admitted<T> | Attempt;
  try {
    admitted = admit(ctx, job, stored);
  } catch (err) {
    throw ctx.leave(err, job);
  }
  if (admitted instanceof Admitted) return admitAndRun(ctx, admitted, token);
  return ctx.apply(job, token, admitted);
}

/**
 * Reads the job and admits the attempt past its key's pause and bulkhead, or
 * says why it does not run (an {@link Attempt} already decided).
 */
function admit<T>(ctx: AttemptContext<T>, job: Job, stored: StoredState): Admitted<T> | Attempt {
  const meta = readJobMeta(job.opts);
  const life = stored.life;
  const lifeState = stateForLife(stored.state, life);
  const attempt = attemptOf(job.attemptsStarted, stored.lifeOffset, lifeState);
  const now = ctx.clock.now();
  const state = recordStalls(lifeState, attempt, now);
  const stalls = state.history.length - lifeState.history.length;
  if (stalls === 0 && state.history.length > 0) {
    // A retry or deferral of this life coming back: its record says when it was due.
    const last = state.history[state.history.length - 1]!;
    if (last.retryAt !== undefined && (last.replay ?? 0) === life)
      ctx.onReturn(job, attempt, last.retryAt, now);
  }
  const policy = ctx.policyOf(meta);

  if (attempt > policy.maxAttempts) {
    // Earlier attempts died with their worker; this one would exceed the limit.
    const death = dying('max-attempts', 'worker died during the last attempt', attempt - 1, now);
    return { attempt, meta, life, kind: 'dead', death, state };
  }

  let data = job.data as T;
  if (ctx.schema) {
    const parsed = ctx.schema.safeParse(job.data);
    if (!parsed.success) {
      const message = formatZodError(parsed.error, 'data');
      const death = dying('invalid-payload', message, attempt, now);
      return { attempt, meta, life, kind: 'dead', death, state };
    }
    data = parsed.data;
  }

  const handle = new AttemptHandle<T>(ctx, job, data, meta, attempt, life, state.history);
  const key = ctx.keyOf(handle);
  const admitted = new Admitted(attempt, meta, life, state, stalls, policy, key, handle, now);
  if (key === undefined) return admitted;
  const paused = ctx.keys.pausedUntil(key);
  if (paused !== undefined)
    return deferAttempt(
      ctx,
      admitted,
      key,
      deferredUntil({ reason: 'pause', notBefore: paused, random: ctx.random }),
      'pause',
    );
  if (!ctx.keys.enter(key, ctx.keyConcurrency(handle))) return deferFull(ctx, admitted, key);
  admitted.entered = true;
  return admitted;
}

/** Puts back a job whose key is full (its bulkhead here, or its adaptive limit in the fleet). */
function deferFull<T>(ctx: AttemptContext<T>, a: Admitted<T>, key: string): Attempt {
  const consecutive = consecutiveDeferrals(a.state);
  const retryAt = deferredUntil({
    reason: 'bulkhead',
    now: a.now,
    consecutive,
    random: ctx.random,
  });
  return deferAttempt(ctx, a, key, retryAt, 'bulkhead');
}

/** Puts the job back without running it: no attempt used, bounded by `maxDeferrals`. */
function deferAttempt<T>(
  ctx: AttemptContext<T>,
  a: Admitted<T>,
  key: string,
  retryAt: number,
  reason: DeferralReason,
): Attempt {
  const why = { breaker: 'the circuit of', pause: 'pause', bulkhead: 'the bulkhead of' }[reason];
  const { attempt, meta, life, state, now } = a;
  a.handle.forget();
  if (state.deferrals + 1 > ctx.maxDeferrals) {
    const message = `${why} ${key} held the job back through ${ctx.maxDeferrals} deferrals`;
    const death = dying('max-deferrals', message, attempt - 1, now);
    return { attempt, meta, life, kind: 'dead', death, state };
  }
  const deferred = recordDeferral(state, { attempt, key, retryAt, now, reason });
  return { attempt, meta, life, kind: 'deferred', retryAt, key, reason, state: deferred };
}

/**
 * One attempt past its key's pause and bulkhead: what {@link admitAndRun}
 * works on. A class: one per job, so its shape is built once.
 */
class Admitted<T> {
  /** The attempt holds a place in its key's bulkhead (to leave when it is over). */
  entered = false;
  /** The breaker the attempt answers to, once it let the attempt run. */
  breakerKey: string | undefined = undefined;
  /** The breaker's probe this attempt is. */
  probeId: string | undefined = undefined;
  /** When the handler was called. */
  startedAt = 0;
  /** The attempt's place under its key's adaptive limit (`key-limits.ts`). */
  lease: Lease | undefined = undefined;

  constructor(
    readonly attempt: number,
    readonly meta: JobMeta,
    readonly life: number,
    readonly state: JobState,
    /** Attempts a crash interrupted, recorded now. */
    readonly stalls: number,
    readonly policy: RetryPolicy,
    readonly key: string | undefined,
    readonly handle: AttemptHandle<T>,
    /** When the attempt began (before the handler ran). */
    readonly now: number,
  ) {}
}

/**
 * The breaker's say, then the handler, then the decision, then `ctx.apply`.
 * The one async frame a completing job takes: kept small, since an async
 * function's frame holds every register it has, and every job pays for it.
 */
async function admitAndRun<T>(
  ctx: AttemptContext<T>,
  a: Admitted<T>,
  token: string,
): Promise<unknown> {
  let settled: Attempt | undefined;
  try {
    // Adaptive concurrency: a lease under the key's fleet-wide limit, or deferred as a full bulkhead.
    if (a.entered && ctx.limits !== undefined) {
      a.lease = await ctx.limits.acquire(a.key!);
      if (a.lease === undefined)
        return ctx.apply(a.handle.bullJob, token, deferFull(ctx, a, a.key!));
    }
    const breakerKey = ctx.breakerKeyOf(a.key);
    if (breakerKey !== undefined) {
      const refused = await askBreaker(ctx, a, breakerKey);
      if (refused !== undefined) return ctx.apply(a.handle.bullJob, token, refused);
    }
    a.startedAt = ctx.clock.now();
    let outcome: Attempt | Promise<Attempt>;
    if (ctx.attemptTimeoutMs !== undefined) outcome = runWithTimeout(ctx, a, ctx.attemptTimeoutMs);
    else {
      // Inline (no extra async frame on the path every job takes).
      let ok = true;
      let value: unknown;
      try {
        value = await ctx.handler(a.handle);
      } catch (error) {
        ok = false;
        value = error;
      }
      outcome = ok ? succeeded(ctx, a, value) : failed(ctx, a, value);
    }
    // `return` of a promise inside `try` leaves its rejection to the caller,
    // which `apply` never has (it is not `return await`).
    settled = outcome instanceof Promise ? await outcome : outcome;
    return ctx.apply(a.handle.bullJob, token, settled);
  } catch (err) {
    throw ctx.leave(err, a.handle.bullJob);
  } finally {
    if (a.entered) ctx.keys.leave(a.key!);
    if (a.lease !== undefined) ctx.limits!.release(a.lease, settled);
  }
}

/** Asks the job's breaker: the deferral when it refuses, nothing when the attempt may run. */
async function askBreaker<T>(
  ctx: AttemptContext<T>,
  a: Admitted<T>,
  breakerKey: string,
): Promise<Attempt | undefined> {
  const job = a.handle.bullJob;
  // A job that already failed is a retry: half-open, retries probe first.
  const checked = ctx.gate.check(
    breakerKey,
    () => `${job.id}:${job.attemptsStarted}`,
    a.attempt > 1,
  );
  const admission = checked instanceof Promise ? await checked : checked;
  if (admission.kind === 'reject') {
    const retryAt = deferredUntil({
      reason: 'breaker',
      notBefore: admission.retryAt,
      random: ctx.random,
    });
    return deferAttempt(ctx, a, breakerKey, retryAt, 'breaker');
  }
  a.breakerKey = breakerKey;
  if (admission.kind === 'probe') a.probeId = admission.probeId;
  return undefined;
}

/** Runs the handler with `attemptTimeoutMs` (see {@link runHandler}), then decides. */
async function runWithTimeout<T>(
  ctx: AttemptContext<T>,
  a: Admitted<T>,
  timeoutMs: number,
): Promise<Attempt> {
  const handle = a.handle;
  const settled = await runHandler(ctx, handle, () => handle.abortable(), timeoutMs);
  return settled.ok ? succeeded(ctx, a, settled.value) : failed(ctx, a, settled.error);
}

/** The outcome of an attempt whose handler returned `value`. */
function succeeded<T>(
  ctx: AttemptContext<T>,
  a: Admitted<T>,
  value: unknown,
): Attempt | Promise<Attempt> {
  const finishedAt = ctx.clock.now();
  const { attempt, meta, life, state, handle, breakerKey } = a;
  handle.forget();
  if (breakerKey !== undefined) {
    // A job that succeeds takes back the failure its breaker counted.
    const counted = ctx.gate.countJob(true, state.breakerStreak, finishedAt);
    ctx.gate
      .outcome(breakerKey, true, a.probeId, counted)
      ?.catch((err) => ctx.logger.warn({ err }, 'breaker'));
  }
  if (ctx.budget) ctx.gate.settle(successRefund(ctx.budget, attempt, state.lastRetryCost));
  const details = AttemptHandle.detailsOf(handle);
  // The successful attempt joins the history when there is a history to
  // join, or details to keep; a first-time success with nothing to say
  // costs no write.
  const worthKeeping = details !== undefined || state.history.length > 0;
  const outcome: Attempt = {
    attempt,
    meta,
    life,
    kind: 'completed',
    result: storableResult(value),
    state: worthKeeping
      ? recordSuccess(state, {
          attempt,
          startedAt: a.startedAt,
          finishedAt,
          ...(details ? { details: storableDetails(details)! } : {}),
        })
      : state,
    stateChanged: worthKeeping || a.stalls > 0,
  };
  const askedPause = AttemptHandle.pauseUntilOf(handle);
  if (askedPause === undefined) return outcome;
  return applyPause(ctx, a.key, askedPause).then(() => outcome);
}

/** The outcome of an attempt whose handler threw (or rejected with) `thrown`. */
async function failed<T>(
  ctx: AttemptContext<T>,
  a: Admitted<T>,
  thrown: unknown,
): Promise<Attempt> {
  const finishedAt = ctx.clock.now();
  const { attempt, meta, life, policy, key, handle, breakerKey, probeId } = a;
  handle.forget();
  let state = a.state;
  const details = AttemptHandle.detailsOf(handle);
  // Classify, pause the key if it asked, feed the breaker, decide.
  const failure = analyse(thrown, ctx.classify, finishedAt);
  const status = failure.error.status;
  const serverDelayMs =
    failure.classification.kind === 'retry' ? failure.classification.retryAfterMs : undefined;
  // A 429, or a 503 with Retry-After, is the key's own instruction: every job of it waits.
  const askedToWait =
    serverDelayMs !== undefined && (status === 429 || status === 503)
      ? finishedAt + serverDelayMs
      : undefined;
  const pauseUntil = Math.max(AttemptHandle.pauseUntilOf(handle) ?? 0, askedToWait ?? 0);
  if (pauseUntil > 0) await applyPause(ctx, key, pauseUntil);
  if (breakerKey !== undefined) {
    // Only failures that speak of the dependency's health count (countsAgainst).
    const healthy = !countsAgainst({
      kind: failure.classification.kind,
      status,
      paused: pauseUntil > 0,
    });
    // Counted once per job, and kept with it, so that its success can take it back.
    const counted =
      healthy || probeId !== undefined
        ? undefined
        : ctx.gate.countJob(false, state.breakerStreak, finishedAt);
    if (counted) state = changeState(state, { breakerStreak: counted.streak });
    if (!healthy || probeId !== undefined)
      ctx.gate
        .outcome(breakerKey, healthy, probeId, counted)
        ?.catch((err) => ctx.logger.warn({ err }, 'breaker'));
  }
  ctx.gate.settle(0);
  let decision: FailureDecision = decideFailure({
    classification: failure.classification,
    policy,
    attemptsMade: attempt,
    previousDelayMs: state.previousDelayMs,
    firstFailedAt: state.firstFailedAt ?? finishedAt,
    now: finishedAt,
    random: ctx.random,
    deadReason: failure.deadReason,
  });
  let budgetExhausted: Attempt['budgetExhausted'];
  if (decision.action === 'retry' && ctx.budget) {
    const classification = failure.classification;
    const { granted, cost } = await ctx.gate.takeRetry(
      classification.kind === 'retry' && classification.timeout,
    );
    // A denied take costs nothing, so its success must refund nothing either.
    state = changeState(state, { lastRetryCost: cost });
    if (!granted) {
      decision = applyEmptyBudget(decision, policy, finishedAt, ctx.budget.onEmpty);
      budgetExhausted = ctx.budget.onEmpty;
    }
  }
  const recorded = recordFailure(
    state,
    {
      attempt,
      startedAt: a.startedAt,
      finishedAt,
      error: failure.error,
      classification: failure.classification.reason,
      ...(details ? { details: storableDetails(details)! } : {}),
    },
    decision,
  );
  const extra = budgetExhausted ? { budgetExhausted } : {};
  if (decision.action === 'dead-letter') {
    const death = dying(decision.reason, failure.error.message, attempt, finishedAt);
    return { attempt, meta, life, ...extra, kind: 'dead', death, state: recorded.state };
  }
  return {
    attempt,
    meta,
    life,
    ...extra,
    kind: 'retry',
    delayMs: decision.delayMs,
    retryAt: decision.retryAt,
    state: recorded.state,
    record: recorded.record,
  };
}

/** Pauses `key` until `until` (when both are given); a Redis failure is logged, not raised. */
async function applyPause<T>(
  ctx: AttemptContext<T>,
  key: string | undefined,
  until: number | undefined,
): Promise<void> {
  if (key === undefined || until === undefined || until <= ctx.clock.now()) return;
  try {
    await ctx.keys.pause(key, until);
  } catch (err) {
    ctx.logger.warn({ err, key }, 'could not pause the key in Redis; paused here only');
  }
}

function dying(reason: Death['reason'], message: string, attempts: number, deadAt: number): Death {
  return { reason, message, attempts: Math.max(0, attempts), deadAt };
}

type Settled = { ok: true; value: unknown } | { ok: false; error: unknown };

/**
 * Runs the handler, turning a synchronous throw into a failure and a hang
 * past `attemptTimeoutMs` into an {@link AttemptTimeoutError} (the job's
 * signal is aborted; whatever the handler does later is ignored).
 */
async function runHandler<T>(
  ctx: AttemptContext<T>,
  handle: RequeueJob<T>,
  abortable: () => AbortController,
  timeoutMs: number,
): Promise<Settled> {
  const run = (async () => ctx.handler(handle))().then(
    (value): Settled => ({ ok: true, value }),
    (error: unknown): Settled => ({ ok: false, error }),
  );
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<Settled>((resolve) => {
    timer = setTimeout(() => {
      const error = new AttemptTimeoutError(`attempt timed out after ${timeoutMs} ms`);
      abortable().abort(error);
      resolve({ ok: false, error });
    }, timeoutMs);
  });
  try {
    return await Promise.race([run, timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

/** A failure as the decision needs it; never throws, whatever was thrown. */
function analyse(
  err: unknown,
  options: ClassifyOptions,
  now: number,
): {
  classification: Classification;
  error: ReturnType<typeof describeError>;
  deadReason: ReturnType<typeof deadReasonOf>;
} {
  let error: ReturnType<typeof describeError>;
  try {
    error = describeError(err);
  } catch {
    error = { class: 'Unknown', message: 'a thrown value that could not be read' };
  }
  let classification: Classification;
  try {
    classification = classifyError(err, options, now);
  } catch {
    // What the classifier could not read, it treats like any unknown error.
    classification = classifyError(new Error(error.message), options, now);
  }
  let deadReason: ReturnType<typeof deadReasonOf>;
  try {
    deadReason = deadReasonOf(err);
  } catch {
    deadReason = undefined;
  }
  return { classification, error, deadReason };
}
