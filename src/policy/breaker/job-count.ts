import { geometryFor } from '../window.js';
import type { BreakerOptions } from './breaker-options.js';
import type { WindowStats } from './breaker.js';

/**
 * What one attempt adds to its breaker's window: the window counts jobs,
 * each by its latest attempt. A job's first counted failure adds an outcome
 * and a failure; a retry of that job adds nothing when it fails again, and
 * takes the failure back when it succeeds — a retry that succeeds is
 * evidence the dependency is up, so a flaky dependency whose retries
 * succeed does not look down, while a down one, whose retries fail too,
 * keeps every failure. (Attempts are still what `consecutiveFailures`
 * counts.) A job whose counted failure may have left the window counts
 * afresh.
 */
export interface JobCount {
  /** Outcomes added to the window: 1 for a job not counted yet, else 0. */
  total: number;
  /** Failures added: 1, 0, or −1 (the job's counted failure taken back). */
  failures: number;
  /** The job's failure the window holds, after this attempt (undefined: none). */
  streak: FailureStreak | undefined;
}

/** A job's failure counted by its breaker and not yet taken back. */
export interface FailureStreak {
  /** When it was counted (the worker's clock). */
  failedAt: number;
  /** The job's failed attempts since (1 or more), for the record. */
  failures: number;
}

/**
 * @param streak the job's counted failure so far (its state's
 *   `breakerStreak`), or undefined.
 */
export function countJob(
  success: boolean,
  streak: FailureStreak | undefined,
  now: number,
  options: Pick<BreakerOptions, 'windowMs' | 'buckets'>,
): JobCount {
  const held = stillCounted(streak, now, options) ? streak : undefined;
  if (success) return { total: held ? 0 : 1, failures: held ? -1 : 0, streak: undefined };
  return held
    ? { total: 0, failures: 0, streak: { failedAt: held.failedAt, failures: held.failures + 1 } }
    : { total: 1, failures: 1, streak: { failedAt: now, failures: 1 } };
}

/**
 * Whether a counted failure is surely still in the window: younger than
 * the window less one bucket (the live buckets always cover that much), so
 * what a success takes back is what the window holds. Otherwise the job
 * counts afresh (erring towards opening).
 */
function stillCounted(
  streak: FailureStreak | undefined,
  now: number,
  options: Pick<BreakerOptions, 'windowMs' | 'buckets'>,
): streak is FailureStreak {
  if (streak === undefined) return false;
  const { bucketMs, buckets } = geometryFor(options.windowMs, options.buckets);
  const age = now - streak.failedAt;
  return age >= 0 && age < bucketMs * (buckets - 1);
}

/**
 * A window's sums as the breaker judges them: never below 0, failures never
 * above the total (what a success took back may outlive what it took back
 * by a bucket, or a close that forgot the failures).
 */
export function windowStats(
  total: number,
  failures: number,
  consecutiveFailures: number,
): WindowStats {
  const outcomes = Math.max(0, total);
  return {
    total: outcomes,
    failures: Math.min(outcomes, Math.max(0, failures)),
    consecutiveFailures,
  };
}

/** A failed attempt, as far as the breaker cares. */
export interface FailureSign {
  /** The classification's kind. */
  kind: 'retry' | 'permanent';
  /** The HTTP status, when an answer came. */
  status?: number | undefined;
  /** The attempt timed out (no answer in time). */
  timeout?: boolean | undefined;
  /** The error code (`ECONNREFUSED`, …), when no answer came. */
  code?: string | undefined;
  /** The key was paused by this attempt (a `Retry-After`, `job.pauseKey()`). */
  paused: boolean;
}

/**
 * Whether a failed attempt speaks against the dependency's health: a
 * timeout, a refused connection, a 5xx do; a permanent answer does not (the
 * dependency answered), nor rate limiting (a 429, or a pause the answer
 * asked for: the dependency asks to slow down, it is not down).
 */
export function countsAgainst(failure: FailureSign): boolean {
  return failure.kind !== 'permanent' && failure.status !== 429 && !failure.paused;
}
