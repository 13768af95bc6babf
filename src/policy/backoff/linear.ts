import type { BackoffInput, BackoffOptions } from './backoff.js';

/**
 * `min(capMs, baseMs · (retry + 1))`.
 * @see seed 001 (Quick Reference, "Linear backoff")
 */
export function linearDelay(
  { retry }: BackoffInput,
  { baseMs, capMs }: Pick<BackoffOptions, 'baseMs' | 'capMs'>,
): number {
  return Math.min(capMs, baseMs * (retry + 1));
}
