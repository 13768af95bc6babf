import type { DeadReason } from '../errors/dead-reason.js';
import type { FailureDecision } from './decide.js';
import { changeState, type AttemptRecord, type ErrorSummary, type JobState } from './job-state.js';

/**
 * The attempt history as pure functions: each takes a state and returns a new
 * one, never mutating its input, so a move that fails leaves the caller's
 * state as it was.
 */

/**
 * The 1-based attempt a job is on: BullMQ's started attempts, less those of
 * earlier lives (`lifeOffset`) and the deferrals of this life (a deferral
 * starts the job without running the handler).
 */
export function attemptOf(attemptsStarted: number, lifeOffset: number, state: JobState): number {
  return Math.max(1, attemptsStarted - lifeOffset - state.deferrals);
}

/** Records of the current life that ran the handler (or were meant to). */
function attemptsRecorded(state: JobState): number {
  let recorded = 0;
  for (const r of state.history)
    if ((r.replay ?? 0) === state.life && r.outcome !== 'deferred') recorded += 1;
  return recorded;
}

/**
 * Adds a `stalled` record for each attempt before `attempt` that left no
 * record: its worker died during it. Returns `state` itself when there are
 * none (the history's growth is the count of stalls).
 */
export function recordStalls(state: JobState, attempt: number, now: number): JobState {
  if (attempt <= 1) return state; // a first attempt: nothing came before it
  const first = attemptsRecorded(state) + 1;
  if (first >= attempt) return state;
  const stalls: AttemptRecord[] = [];
  for (let missing = first; missing < attempt; missing += 1) {
    stalls.push({
      attempt: missing,
      replay: state.life,
      startedAt: now,
      outcome: 'stalled',
      decision: 'retry',
      error: { class: 'Stalled', message: 'the worker stopped during this attempt' },
    });
  }
  return changeState(state, { history: [...state.history, ...stalls] });
}

/** What holds a job back without running it: its circuit, its key's pause, bulkhead or rate limit. */
export type DeferralReason = 'breaker' | 'pause' | 'bulkhead' | 'rate-limit';

/**
 * A breaker deferral: consecutive deferrals share one record (with a count),
 * so an outage does not bloat the history.
 */
export function recordDeferral(
  state: JobState,
  input: {
    attempt: number;
    key: string;
    retryAt: number;
    now: number;
    /** What held the job back. */
    reason: DeferralReason;
  },
): JobState {
  const delayMs = Math.max(0, input.retryAt - input.now);
  const last = state.history.at(-1);
  const deferrals = state.deferrals + 1;
  if (last?.outcome === 'deferred' && (last.replay ?? 0) === state.life) {
    // The same record, counted once more (built field by field: see changeState).
    const merged: AttemptRecord = {
      attempt: last.attempt,
      replay: last.replay,
      startedAt: last.startedAt,
      outcome: 'deferred',
      decision: 'deferred',
      delayMs,
      retryAt: input.retryAt,
      details: {
        breakerKey: last.details?.breakerKey ?? input.key,
        reason: input.reason,
        count: Number(last.details?.count ?? 1) + 1,
      },
    };
    return changeState(state, { deferrals, history: [...state.history.slice(0, -1), merged] });
  }
  const record: AttemptRecord = {
    attempt: input.attempt,
    replay: state.life,
    startedAt: input.now,
    outcome: 'deferred',
    decision: 'deferred',
    delayMs,
    retryAt: input.retryAt,
    details: { breakerKey: input.key, reason: input.reason, count: 1 },
  };
  return changeState(state, { deferrals, history: [...state.history, record] });
}

/** What a failed attempt leaves in the history, whatever was decided. */
export interface FailedAttempt {
  attempt: number;
  startedAt: number;
  finishedAt: number;
  error: ErrorSummary;
  classification: string;
  details?: Record<string, unknown>;
}

/**
 * A failed attempt and the decision taken on it: the record, and for a
 * retry the strategy's memory (previous delay, first failure).
 */
export function recordFailure(
  state: JobState,
  failed: FailedAttempt,
  decision: FailureDecision,
): { state: JobState; record: AttemptRecord } {
  const record: AttemptRecord = {
    attempt: failed.attempt,
    replay: state.life,
    startedAt: failed.startedAt,
    finishedAt: failed.finishedAt,
    outcome: 'failed',
    error: failed.error,
    classification: failed.classification,
    decision: decision.kind,
    ...(decision.kind === 'retry'
      ? { delayMs: decision.delayMs, retryAt: decision.retryAt, delaySource: decision.source }
      : { deadReason: decision.reason }),
    ...(failed.details ? { details: failed.details } : {}),
  };
  const next = changeState(state, {
    history: [...state.history, record],
    firstFailedAt: state.firstFailedAt ?? failed.finishedAt,
    previousDelayMs: decision.kind === 'retry' ? decision.delayMs : state.previousDelayMs,
  });
  return { state: next, record };
}

/** A successful attempt, kept in the history with what the handler annotated. */
export function recordSuccess(
  state: JobState,
  done: {
    attempt: number;
    startedAt: number;
    finishedAt: number;
    details?: Record<string, unknown>;
  },
): JobState {
  const record: AttemptRecord = {
    attempt: done.attempt,
    replay: state.life,
    startedAt: done.startedAt,
    finishedAt: done.finishedAt,
    outcome: 'succeeded',
    decision: 'completed',
    ...(done.details ? { details: done.details } : {}),
  };
  return changeState(state, { history: [...state.history, record] });
}

/** How a job left the queue for the DLQ. */
export interface Death {
  reason: DeadReason;
  message: string;
  /** Attempts the job made in the life that ended. */
  attempts: number;
  deadAt: number;
}
