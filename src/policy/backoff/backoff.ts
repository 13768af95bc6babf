import type { Random } from '../../util/system.js';

/** What a backoff strategy knows about the retry it is delaying. */
export interface BackoffInput {
  /** Which retry this is: 0 for the first retry (after the first failure). */
  retry: number;
  /**
   * The delay this job actually waited before its previous retry, for the
   * strategies that carry state (decorrelated and normal jitter). Undefined
   * when there was none.
   */
  previousDelayMs?: number;
  /** Uniform source in `[0, 1)`; inject a seeded one to repeat a run. */
  random: Random;
}

/**
 * The numeric options a strategy may read. Each strategy picks the ones it
 * needs; their defaults and validation live in `retry-policy.ts`.
 */
export interface BackoffOptions {
  /** The first (and base) delay in milliseconds. */
  baseMs: number;
  /** The longest delay in milliseconds. */
  capMs: number;
  /** Growth per retry of the exponential strategies. */
  factor: number;
  /** Standard deviation of normal jitter, as a fraction of the delay. */
  jitter: number;
  /** Width in milliseconds of the uniform term the Google strategy adds. */
  randomMs: number;
  /** The schedule strategy's delays, one per retry (the last repeated). */
  scheduleMs?: readonly number[] | undefined;
}

/** A backoff strategy: a pure function from a retry to its delay in milliseconds. */
export type BackoffStrategy = (input: BackoffInput, options: BackoffOptions) => number;

/** Clamps a delay to `[0, capMs]`. */
export function clampDelay(delayMs: number, capMs: number): number {
  return Math.min(capMs, Math.max(0, delayMs));
}

/**
 * `min(capMs, baseMs · factor^retry)`, safe for any retry: `factor ** retry`
 * overflows to Infinity for large retries, and `0 · Infinity` is NaN, so the
 * growth is compared with the headroom `capMs / baseMs` before multiplying.
 */
export function exponentialCeiling(
  retry: number,
  { baseMs, capMs, factor }: Pick<BackoffOptions, 'baseMs' | 'capMs' | 'factor'>,
): number {
  if (baseMs <= 0) return 0;
  const growth = factor ** retry;
  return growth >= capMs / baseMs ? capMs : baseMs * growth;
}
