import { uniform } from '../../util/random.js';
import type { BackoffInput, BackoffOptions } from './backoff.js';

/**
 * `min(capMs, uniform(baseMs, previous · 3))`, where `previous` is the delay
 * actually returned for the previous retry (`baseMs` before the first). It
 * grows from its own last value rather than from the retry index, so the
 * caller must carry `previousDelayMs`.
 * @see seed 001 (Quick Reference, "Decorrelated jitter")
 */
export function decorrelatedJitterDelay(
  { previousDelayMs, random }: BackoffInput,
  { baseMs, capMs }: Pick<BackoffOptions, 'baseMs' | 'capMs'>,
): number {
  const previous = previousDelayMs ?? baseMs;
  return Math.min(capMs, uniform(random, baseMs, previous * 3));
}
