import { uniform } from '../../util/random.js';
import { exponentialCeiling, type BackoffInput, type BackoffOptions } from './backoff.js';

/**
 * `e/2 + uniform(0, e/2)` with `e = min(capMs, baseMs · factor^retry)`: half
 * fixed, half random, for a guaranteed minimum wait of `e/2`.
 * @see seed 001 (Quick Reference, "Equal jitter")
 */
export function equalJitterDelay(
  { retry, random }: BackoffInput,
  options: Pick<BackoffOptions, 'baseMs' | 'capMs' | 'factor'>,
): number {
  const half = exponentialCeiling(retry, options) / 2;
  return half + uniform(random, 0, half);
}
