import { geometryFor } from '../window.js';
import type { BreakerOptions } from './breaker-options.js';
import type { WindowStats } from './breaker.js';

/**
 * What one attempt adds to its breaker's window. Every failed attempt is
 * one failure, as it happens, so a down dependency opens the circuit after
 * `minimumRequests` calls however many of them are retries; but a job that
 * then succeeds takes back the failures it added (those still in the
 * window): it counts as its single outcome, a success. A retry that
 * succeeds is evidence the dependency is up, so a flaky dependency whose
 * retries succeed does not look down, while a down one, whose retries fail
 * too, keeps every failure.
 */
export interface JobCount {
  /** Outcomes added to the window: 1, or 1 − k for a success after k counted failures. */
  total: number;
  /** Failures added: 1 for a failure, −k for a success after k counted failures, else 0. */
  failures: number;
  /** The job's failures the window holds, after this attempt (undefined: none). */
  streak: FailureStreak | undefined;
}

/** A job's failures counted by its breaker and not yet taken back. */
export interface FailureStreak {
  /** When the first of them was counted (the worker's clock). */
  failedAt: number;
  /** How many. */
  failures: number;
}

/**
 * @param streak the job's counted failures so far (its state's
 *   `breakerStreak`), or undefined.
 */
export function countJob(
  success: boolean,
  streak: FailureStreak | undefined,
  now: number,
  options: Pick<BreakerOptions, 'windowMs' | 'buckets'>,
): JobCount {
  const held = stillCounted(streak, now, options) ? streak : undefined;
  if (!success)
    return {
      total: 1,
      failures: 1,
      streak: held
        ? { failedAt: held.failedAt, failures: held.failures + 1 }
        : { failedAt: now, failures: 1 },
    };
  const k = held?.failures ?? 0;
  return { total: 1 - k, failures: 0 - k, streak: undefined };
}

/**
 * Whether a streak's failures are surely all still in the window: its
 * first is younger than the window less one bucket (the live buckets always
 * cover that much), so what a success takes back is what the window holds.
 * Otherwise the success takes back nothing (erring towards opening).
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
