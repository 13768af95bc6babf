import type { Job } from 'bullmq';
import type { z } from 'zod';
import { formatZodError } from '../policy/validate.js';
import type { Logger } from '../config/logger.js';
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
import type { StoredState } from './job-moves.js';

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

/** An attempt that ran past `attemptTimeoutMs`: retryable, and counted as a timeout. */
export class AttemptTimeoutError extends Error {
  override name = 'TimeoutError';
}

/**
 * Runs one attempt of a job and says what became of it. Whatever the handler
 * does — returns anything, throws anything, hangs — the answer is an
 * {@link AttemptOutcome}; the only failures (a throw or a rejection) are
 * requeue's own I/O failing (the breaker or budget in Redis) or a per-job
 * option function throwing, which the worker leaves to stalled recovery.
 */
export function runAttempt<T>(
  ctx: AttemptContext<T>,
  job: Job,
  stored: StoredState,
): Attempt | Promise<Attempt> {
  const meta = readJobMeta(job.opts);
  const life = stored.life;
  let state = stateForLife(stored.state, life);
  const attempt = attemptOf(job.attemptsStarted, stored.lifeOffset, state);
  const base = { attempt, meta, life };
  const now = ctx.clock.now();
  const stalls = recordStalls(state, attempt, now);
  state = stalls.state;
  if (stalls.stalls === 0 && state.history.length > 0) {
    // A retry or deferral of this life coming back: its record says when it was due.
    const last = state.history[state.history.length - 1]!;
    if (last.retryAt !== undefined && (last.replay ?? 0) === life)
      ctx.onReturn(job, attempt, last.retryAt, now);
  }
  const policy = ctx.policyOf(meta);

  if (attempt > policy.maxAttempts) {
    // Earlier attempts died with their worker; this one would exceed the limit.
    const death = dying('max-attempts', 'worker died during the last attempt', attempt - 1, now);
    return { attempt: base.attempt, meta: base.meta, life: base.life, kind: 'dead', death, state };
  }

  let data = job.data as T;
  if (ctx.schema) {
    const parsed = ctx.schema.safeParse(job.data);
    if (!parsed.success) {
      const message = formatZodError(parsed.error, 'data');
      return {
        attempt: base.attempt,
        meta: base.meta,
        life: base.life,
        kind: 'dead',
        death: dying('invalid-payload', message, attempt, now),
        state,
      };
    }
    data = parsed.data;
  }

  const handle = new AttemptHandle<T>(ctx, job, data, meta, attempt, life, state.history);
  const key = ctx.keyOf(handle);
  const admitted: Admitted<T> = { base, state, stalls: stalls.stalls, policy, key, handle, now };
  if (key === undefined) return admitAndRun(ctx, admitted);
  const paused = ctx.keys.pausedUntil(key);
  if (paused !== undefined)
    return deferAttempt(
      ctx,
      admitted,
      key,
      deferredUntil({ reason: 'pause', notBefore: paused, random: ctx.random }),
      'pause',
    );
  if (!ctx.keys.enter(key, ctx.keyConcurrency(handle))) {
    const consecutive = consecutiveDeferrals(state);
    const retryAt = deferredUntil({ reason: 'bulkhead', now, consecutive, random: ctx.random });
    return deferAttempt(ctx, admitted, key, retryAt, 'bulkhead');
  }
  // Not an async function: no extra promise and frame on the path every job takes.
  return admitAndRun(ctx, admitted).finally(() => ctx.keys.leave(key));
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
  const { base, state, now } = a;
  const { attempt } = base;
  a.handle.forget();
  if (state.deferrals + 1 > ctx.maxDeferrals) {
    const message = `${why} ${key} held the job back through ${ctx.maxDeferrals} deferrals`;
    return {
      attempt: base.attempt,
      meta: base.meta,
      life: base.life,
      kind: 'dead',
      death: dying('max-deferrals', message, attempt - 1, now),
      state,
    };
  }
  const deferred = recordDeferral(state, { attempt, key, retryAt, now, reason });
  return {
    attempt: base.attempt,
    meta: base.meta,
    life: base.life,
    kind: 'deferred',
    retryAt,
    key,
    reason,
    state: deferred,
  };
}

/** One attempt past its key's pause and bulkhead: what {@link admitAndRun} works on. */
interface Admitted<T> {
  base: { attempt: number; meta: JobMeta; life: number };
  state: JobState;
  stalls: number;
  policy: RetryPolicy;
  key: string | undefined;
  handle: AttemptHandle<T>;
  /** When the attempt began (before the handler ran). */
  now: number;
}

/** The breaker's say, then the handler, then the decision. */
async function admitAndRun<T>(ctx: AttemptContext<T>, a: Admitted<T>): Promise<Attempt> {
  const { base, policy, key, handle } = a;
  const { attempt } = base;
  const job = handle.bullJob;
  let state = a.state;
  const breakerKey = ctx.breakerKeyOf(key);
  let probeId: string | undefined;
  if (breakerKey !== undefined) {
    const checked = ctx.gate.check(breakerKey, () => `${job.id}:${job.attemptsStarted}`);
    const admission = checked instanceof Promise ? await checked : checked;
    if (admission.kind === 'reject') {
      const retryAt = deferredUntil({
        reason: 'breaker',
        notBefore: admission.retryAt,
        random: ctx.random,
      });
      return deferAttempt(ctx, a, breakerKey, retryAt, 'breaker');
    }
    if (admission.kind === 'probe') probeId = admission.probeId;
  }

  const startedAt = ctx.clock.now();
  let settled: Settled;
  if (ctx.attemptTimeoutMs === undefined) {
    // Inline (no extra async frame on the path every job takes).
    try {
      settled = { ok: true, value: await ctx.handler(handle) };
    } catch (error) {
      settled = { ok: false, error };
    }
  } else {
    settled = await runHandler(ctx, handle, () => handle.abortable(), ctx.attemptTimeoutMs);
  }
  handle.forget();
  const finishedAt = ctx.clock.now();
  const details = AttemptHandle.detailsOf(handle);

  if (settled.ok) {
    if (breakerKey !== undefined)
      ctx.gate
        .outcome(breakerKey, true, probeId)
        ?.catch((err) => ctx.logger.warn({ err }, 'breaker'));
    if (ctx.budget) ctx.gate.settle(successRefund(ctx.budget, attempt, state.lastRetryCost));
    const askedPause = AttemptHandle.pauseUntilOf(handle);
    if (askedPause !== undefined) await applyPause(ctx, key, askedPause);
    // The successful attempt joins the history when there is a history to
    // join, or details to keep; a first-time success with nothing to say
    // costs no write.
    const worthKeeping = details !== undefined || state.history.length > 0;
    return {
      attempt: base.attempt,
      meta: base.meta,
      life: base.life,
      kind: 'completed',
      result: storableResult(settled.value),
      state: worthKeeping
        ? recordSuccess(state, {
            attempt,
            startedAt,
            finishedAt,
            ...(details ? { details: storableDetails(details)! } : {}),
          })
        : state,
      stateChanged: worthKeeping || a.stalls > 0,
    };
  }

  // The handler failed: classify, pause the key if it asked, feed the breaker, decide.
  const failure = analyse(settled.error, ctx.classify, finishedAt);
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
    // Only failures that speak of the dependency's health count: not a
    // permanent answer (a probe that got one shows the dependency answering),
    // not rate limiting (a 429, a pause: the dependency asks to slow down).
    const healthy = failure.classification.kind === 'permanent' || status === 429 || pauseUntil > 0;
    if (!healthy || probeId !== undefined)
      ctx.gate
        .outcome(breakerKey, healthy, probeId)
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
      startedAt,
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
    return {
      attempt: base.attempt,
      meta: base.meta,
      life: base.life,
      ...extra,
      kind: 'dead',
      death,
      state: recorded.state,
    };
  }
  return {
    attempt: base.attempt,
    meta: base.meta,
    life: base.life,
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
