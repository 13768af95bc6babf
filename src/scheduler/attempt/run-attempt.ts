/**
 * One job → one tagged outcome: the attempt admitted (`admit.ts`), the
 * handler run (`run-handler.ts`), what happened decided and handed to the
 * worker's `apply`.
 */
import type { Job } from 'bullmq';
import { recordFailure, recordSuccess } from '../../policy/attempt-history.js';
import { successRefund } from '../../policy/budget/budget-options.js';
import { countsAgainst } from '../../policy/breaker/job-count.js';
import { analyse } from '../../policy/classify/analyse.js';
import { stackOf } from '../../policy/classify/describe-error.js';
import { applyEmptyBudget, decideFailure, type FailureDecision } from '../../policy/decide.js';
import { changeState } from '../../policy/job-state.js';
import { storableDetails, storableResult } from '../../policy/outcome.js';
import { holdJob, type HeldJob } from '../bullmq/held-job.js';
import type { StoredState } from '../bullmq/job-moves.js';
import { Admitted, admit, askBreaker, deferAttempt, deferFull, dying } from './admit.js';
import { isDeferError } from '../../errors/defer-error.js';
import type { Attempt, AttemptContext } from './context.js';
import { AttemptHandle } from './handle.js';
import { holdForRate } from './rate-admit.js';
import { runHandler } from './run-handler.js';
import { throttledUntil } from './throttled.js';
import { attemptSignal } from '../worker-limit.js';

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
  const held = holdJob(job);
  let admitted: Admitted<T> | Attempt;
  try {
    admitted = admit(ctx, job, stored);
  } catch (err) {
    throw ctx.leave(err, held);
  }
  if (admitted instanceof Admitted) return admitAndRun(ctx, admitted, held, token);
  return ctx.apply(held, token, admitted);
}

/**
 * The breaker's say, then the handler, then the decision, then `ctx.apply`.
 * The one async frame a completing job takes: kept small, since an async
 * function's frame holds every register it has, and every job pays for it.
 */
async function admitAndRun<T>(
  ctx: AttemptContext<T>,
  a: Admitted<T>,
  held: HeldJob,
  token: string,
): Promise<unknown> {
  let settled: Attempt | undefined;
  let limited = false;
  try {
    // A rate-limited key: the attempt waits for its reserved slot (deferred, no attempt used).
    if (a.key !== undefined && ctx.rateSlot !== undefined) {
      const waiting = await holdForRate(ctx, a, a.key);
      if (waiting !== undefined) return ctx.apply(held, token, waiting);
    }
    // Adaptive concurrency: a lease under the key's fleet-wide limit, or deferred as a full bulkhead.
    if (a.entered && ctx.limits !== undefined) {
      a.lease = await ctx.limits.acquire(a.key!);
      if (a.lease === undefined) return ctx.apply(held, token, deferFull(ctx, a, a.key!));
    }
    const breakerKey = ctx.breakerKeyOf(a.key);
    if (breakerKey !== undefined) {
      const refused = await askBreaker(ctx, a, breakerKey);
      if (refused !== undefined) return ctx.apply(held, token, refused);
    }
    a.startedAt = ctx.clock.now();
    if (ctx.workerLimit !== undefined) {
      ctx.workerLimit.started();
      limited = true;
    }
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
    return ctx.apply(held, token, settled);
  } catch (err) {
    throw ctx.leave(err, held);
  } finally {
    if (a.entered) ctx.keys.leave(a.key!, a.startedAt !== 0);
    if (a.lease !== undefined) ctx.limits!.release(a.lease, settled);
    if (limited) {
      // The handler's own latency: the read its outcome made, when it made one.
      const now = a.finishedAt !== 0 ? a.finishedAt : ctx.clock.now();
      ctx.workerLimit!.finished(now - a.startedAt, attemptSignal(settled), now);
    }
  }
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
  const finishedAt = (a.finishedAt = ctx.clock.now());
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
  const finishedAt = (a.finishedAt = ctx.clock.now());
  const { attempt, meta, life, policy, key, handle, breakerKey, probeId } = a;
  if (key !== undefined && isDeferError(thrown) && thrown.untilMs > finishedAt) {
    // The handler holds the job back: no attempt used, the key paused for all.
    await applyPause(ctx, key, thrown.untilMs);
    return deferAttempt(ctx, a, key, thrown.untilMs, 'pause');
  }
  handle.forget();
  let state = a.state;
  const details = AttemptHandle.detailsOf(handle);
  // Classify, pause the key if it asked, feed the breaker, decide.
  const failure = analyse(thrown, ctx.classify, finishedAt);
  const status = failure.error.status;
  const serverDelayMs =
    failure.classification.kind === 'retry' ? failure.classification.retryAfterMs : undefined;
  // A 503 with Retry-After is the key's own instruction: every job of it waits.
  // A 429 pauses the key only when it keeps coming (throttled.ts).
  const askedToWait =
    status === 429
      ? await throttledUntil(ctx, a, serverDelayMs, finishedAt)
      : serverDelayMs !== undefined && status === 503
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
  if (decision.kind === 'retry' && ctx.budget) {
    const classification = failure.classification;
    const { granted, cost } = await ctx.gate.takeRetry(
      classification.kind === 'retry' && classification.timeout,
    );
    // A denied take costs nothing, so its success must refund nothing either.
    state = changeState(state, { lastRetryCost: cost });
    if (!granted) decision = applyEmptyBudget(decision, policy, finishedAt, ctx.budget, ctx.random);
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
  if (decision.kind === 'dead-letter') {
    const death = dying(decision.reason, failure.error.message, attempt, finishedAt);
    return { attempt, meta, life, kind: 'dead', death, state: recorded.state };
  }
  // Kept on the retry move only (the DLQ record has the history); read once here.
  const thrownStack = stackOf(thrown);
  const stack = thrownStack === undefined ? {} : { stack: thrownStack };
  return {
    attempt,
    meta,
    life,
    kind: 'retry',
    delayMs: decision.delayMs,
    retryAt: decision.retryAt,
    state: recorded.state,
    record: recorded.record,
    ...stack,
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
