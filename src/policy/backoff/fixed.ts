import type { BackoffInput, BackoffOptions } from './backoff.js';

/**
 * The same delay every time: `baseMs`. For polling rather than retries, since
 * clients that failed together retry together.
 * @see seed 001 (Quick Reference, "Fixed delay")
 */
export function fixedDelay(
  _input: BackoffInput,
  { baseMs }: Pick<BackoffOptions, 'baseMs'>,
): number {
  return baseMs;
}
