import { exponentialCeiling, type BackoffInput, type BackoffOptions } from './backoff.js';

/**
 * `min(capMs, baseMs · factor^retry)`, without jitter: clients that failed
 * together stay in step, so prefer a jittered strategy.
 * @see seed 001 (Quick Reference, "Exponential (no jitter)")
 */
export function exponentialDelay(
  { retry }: BackoffInput,
  options: Pick<BackoffOptions, 'baseMs' | 'capMs' | 'factor'>,
): number {
  return exponentialCeiling(retry, options);
}
