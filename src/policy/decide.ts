import type { Random } from '../util/system.js';
import type { Classification } from './classify/classify.js';
import type { DeadReason } from '../errors/dead-reason.js';
import { dueAfter } from './due-time.js';
import { planNextAttempt, type RetryPolicy } from './retry-policy.js';

/** What becomes of a failed attempt: a tagged value, never a sentinel number. */
export type FailureDecision =
  | {
      kind: 'retry';
      delayMs: number;
      retryAt: number;
      /** `strategy`: the policy's formula; `server`: a Retry-After; `budget`: pushed to the cap. */
      source: 'strategy' | 'server' | 'budget';
    }
  | { kind: 'dead-letter'; reason: DeadReason };

export interface FailureContext {
  classification: Classification;
  policy: RetryPolicy;
  /** Attempts finished so far, the failed one included (≥ 1). */
  attemptsMade: number;
  previousDelayMs?: number;
  firstFailedAt: number;
  now: number;
  random: Random;
  /** A reason the error itself names (a `PermanentError`'s): it wins over the tree's. */
  deadReason?: DeadReason | undefined;
}

/**
 * The decision tree of seed 001: a permanent error dies at once; a retryable
 * one is retried on the policy's schedule (or the server's) until the
 * attempts or the time window run out.
 */
export function decideFailure(ctx: FailureContext): FailureDecision {
  const decision = decideByTree(ctx);
  if (decision.kind === 'dead-letter' && ctx.deadReason !== undefined)
    return { kind: 'dead-letter', reason: ctx.deadReason };
  return decision;
}

function decideByTree(ctx: FailureContext): FailureDecision {
  const { classification } = ctx;
  if (classification.kind === 'permanent') {
    return {
      kind: 'dead-letter',
      reason: classification.reason === 'gone' ? 'gone' : 'permanent-error',
    };
  }
  const next = planNextAttempt(ctx.policy, {
    attemptsMade: ctx.attemptsMade,
    previousDelayMs: ctx.previousDelayMs,
    firstFailedAt: ctx.firstFailedAt,
    now: ctx.now,
    random: ctx.random,
    serverDelayMs: classification.retryAfterMs,
  });
  if (next.kind === 'give-up') return { kind: 'dead-letter', reason: next.reason };
  return { kind: 'retry', delayMs: next.delayMs, retryAt: next.retryAt, source: next.source };
}

/** What an empty budget does to a retry (`budget.onEmpty`, `budget.emptyDelayMs`). */
export interface EmptyBudgetRule {
  onEmpty: 'delay' | 'delay-to-cap' | 'dead-letter';
  emptyDelayMs: number;
}

/**
 * What an empty retry budget does to a retry: the job is never dropped.
 * `delay`: it waits `max(its own delay, uniform(½, 1) × bound)` with the
 * bound `min(emptyDelayMs, capMs)` — long enough that the parked retries
 * send nothing while the bucket refills, spread so that they do not come
 * back as one herd, and never the policy's cap (the user's worst case, not
 * a pause). `delay-to-cap`: exactly the cap (every parked retry comes back
 * at once). `dead-letter`: it dies with `budget-exhausted`.
 * @see seed 001, "retry budget / token bucket"; bench/RESULTS.md, the outage's protections
 */
export function applyEmptyBudget(
  decision: Extract<FailureDecision, { kind: 'retry' }>,
  policy: RetryPolicy,
  now: number,
  rule: EmptyBudgetRule,
  random: Random,
): FailureDecision {
  if (rule.onEmpty === 'dead-letter') return { kind: 'dead-letter', reason: 'budget-exhausted' };
  const pause =
    rule.onEmpty === 'delay-to-cap'
      ? policy.capMs
      : Math.min(rule.emptyDelayMs, policy.capMs) * (0.5 + 0.5 * random());
  return { kind: 'retry', ...dueAfter(now, Math.max(decision.delayMs, pause)), source: 'budget' };
}
