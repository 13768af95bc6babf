import { uniform } from '../../util/random.js';
import { exponentialCeiling, type BackoffInput, type BackoffOptions } from './backoff.js';

/**
 * Uniform on `[0, min(capMs, baseMs · factor^retry))`: the default, because it
 * spreads a crowd of retrying clients the most.
 * @see seed 001 (Quick Reference, "Full jitter"; AWS Architecture Blog, "Exponential Backoff And Jitter")
 */
export function fullJitterDelay(
  { retry, random }: BackoffInput,
  options: Pick<BackoffOptions, 'baseMs' | 'capMs' | 'factor'>,
): number {
  return uniform(random, 0, exponentialCeiling(retry, options));
}
