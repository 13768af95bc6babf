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
  type Death,
} from '../policy/attempt-history.js';
import type { BudgetOptions } from '../policy/budget/budget-options.js';
import { successRefund } from '../policy/budget/budget-options.js';
import { classifyError, describeError } from '../policy/classify/index.js';
import type { Classification, ClassifyOptions } from '../policy/classify/classify.js';
import { applyEmptyBudget, decideFailure, type FailureDecision } from '../policy/decide.js';
import {
  readJobMeta,
  stateForLife,
  type AttemptRecord,
  type JobMeta,
} from '../policy/job-state.js';
import { storableDetails, storableResult, type AttemptOutcome } from '../policy/outcome.js';
import type { RetryPolicy } from '../policy/retry-policy.js';
import type { Clock, Random } from '../util/system.js';
import type { BreakerGate } from './breaker-gate.js';
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
  /** The breaker key of a job, or none (no breaker, or `breakerKey` chose none). */
  readonly breakerKeyOf: (job: RequeueJob<T>) => string | undefined;
  readonly budget: BudgetOptions | undefined;
  readonly maxDeferrals: number;
  readonly attemptTimeoutMs: number | undefined;
  readonly closing: AbortSignal;
  readonly clock: Clock;
  readonly random: Random;
  readonly logger: Logger;
}

/** An outcome with what the worker needs to announce it. */
export type Attempt = AttemptOutcome & {
  attempt: number;
  meta: JobMeta;
  life: number;
  /** The retry budget turned this retry down (announced after the move). */
  budgetExhausted?: 'delay-to-cap' | 'dead-letter';
};

/** An attempt that ran past `attemptTimeoutMs`: retryable, and counted as a timeout. */
export class AttemptTimeoutError extends Error {
  override name = 'TimeoutError';
}

/**
 * Runs one attempt of a job and says what became of it. Whatever the handler
 * does — returns anything, throws anything, hangs — the answer is an
 * {@link AttemptOutcome}; the only rejections are requeue's own I/O failing
 * (the breaker or budget in Redis), which the worker leaves to stalled
 * recovery.
 */
export async function runAttempt<T>(
  ctx: AttemptContext<T>,
  job: Job,
  stored: StoredState,
): Promise<Attempt> {
  const meta = readJobMeta(job.opts);
  const life = stored.life;
  let state = stateForLife(stored.state, life);
  const attempt = attemptOf(job.attemptsStarted, stored.lifeOffset, state);
  const base = { attempt, meta, life };
  const now = ctx.clock.now();
  const stalls = recordStalls(state, attempt, now);
  state = stalls.state;
  const policy = ctx.policyOf(meta);

  if (attempt > policy.maxAttempts) {
    // Earlier attempts died with their worker; this one would exceed the limit.
    const death = dying('max-attempts', 'worker died during the last attempt', attempt - 1, now);
    return { ...base, kind: 'dead', death, state };
  }

  let data = job.data as T;
  if (ctx.schema) {
    const parsed = ctx.schema.safeParse(job.data);
    if (!parsed.success) {
      const message = formatZodError(parsed.error, 'data');
      return {
        ...base,
        kind: 'dead',
        death: dying('invalid-payload', message, attempt, now),
        state,
      };
    }
    data = parsed.data;
  }

  const controller = new AbortController();
  const onClosing = (): void => controller.abort(ctx.closing.reason);
  if (ctx.closing.aborted) onClosing();
  else ctx.closing.addEventListener('abort', onClosing, { once: true });
  let details: Record<string, unknown> | undefined;
  const handle: RequeueJob<T> = Object.freeze({
    id: String(job.id),
    name: job.name,
    data,
    queue: ctx.queue,
    idempotencyKey: meta.key,
    attempt,
    replays: life,
    history: state.history,
    tags: meta.tags ?? {},
    signal: controller.signal,
    annotate: (extra: Record<string, unknown>) => {
      try {
        details = { ...details, ...extra };
      } catch {
        details = { ...details, annotateError: 'annotate() needs an object' };
      }
    },
    bullJob: job,
  });

  const breakerKey = ctx.breakerKeyOf(handle);
  let probeId: string | undefined;
  if (breakerKey !== undefined) {
    const checked = ctx.gate.check(breakerKey, () => `${job.id}:${job.attemptsStarted}`);
    const admission = checked instanceof Promise ? await checked : checked;
    if (admission.kind === 'reject') {
      ctx.closing.removeEventListener('abort', onClosing);
      if (state.deferrals + 1 > ctx.maxDeferrals) {
        const message = `circuit ${breakerKey} stayed open through ${ctx.maxDeferrals} deferrals`;
        return {
          ...base,
          kind: 'dead',
          death: dying('max-deferrals', message, attempt - 1, now),
          state,
        };
      }
      const deferred = recordDeferral(state, {
        attempt,
        key: breakerKey,
        retryAt: admission.retryAt,
        now,
      });
      return {
        ...base,
        kind: 'deferred',
        retryAt: admission.retryAt,
        key: breakerKey,
        state: deferred,
      };
    }
    if (admission.kind === 'probe') probeId = admission.probeId;
  }

  const startedAt = ctx.clock.now();
  const settled = await runHandler(ctx, handle, controller);
  ctx.closing.removeEventListener('abort', onClosing);

  if (settled.ok) {
    if (breakerKey !== undefined)
      ctx.gate
        .outcome(breakerKey, true, probeId)
        ?.catch((err) => ctx.logger.warn({ err }, 'breaker'));
    if (ctx.budget) ctx.gate.settle(successRefund(ctx.budget, attempt, state.lastRetryCost));
    return {
      ...base,
      kind: 'completed',
      result: storableResult(settled.value),
      state,
      stateChanged: stalls.stalls > 0,
    };
  }

  // The handler failed: classify, feed the breaker, decide.
  const finishedAt = ctx.clock.now();
  const failure = analyse(settled.error, ctx.classify, finishedAt);
  if (breakerKey !== undefined) {
    // Only failures that speak of the dependency's health count; a probe that
    // got a permanent answer shows the dependency is answering.
    const healthy = failure.classification.kind === 'permanent';
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
    state = { ...state, lastRetryCost: cost };
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
    return { ...base, ...extra, kind: 'dead', death, state: recorded.state };
  }
  return {
    ...base,
    ...extra,
    kind: 'retry',
    delayMs: decision.delayMs,
    retryAt: decision.retryAt,
    state: recorded.state,
    record: recorded.record,
  };
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
  controller: AbortController,
): Promise<Settled> {
  const run = (async () => ctx.handler(handle))().then(
    (value): Settled => ({ ok: true, value }),
    (error: unknown): Settled => ({ ok: false, error }),
  );
  const timeoutMs = ctx.attemptTimeoutMs;
  if (timeoutMs === undefined) return run;
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<Settled>((resolve) => {
    timer = setTimeout(() => {
      const error = new AttemptTimeoutError(`attempt timed out after ${timeoutMs} ms`);
      controller.abort(error);
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
