import { standardNormal } from '../../util/random.js';
import {
  clampDelay,
  exponentialCeiling,
  type BackoffInput,
  type BackoffOptions,
} from './backoff.js';

/**
 * Multiplicative growth with normal jitter: `d + N(0, (d · jitter)²)`,
 * clamped to `[0, capMs]`, where
 * - `d = min(previous · factor, capMs)` and `previous` is the delay actually
 *   returned for the previous retry (jitter included), as in seed 004's loop;
 * - without a previous delay, `d = min(capMs, baseMs · factor^retry)`, which
 *   for the first retry is seed 004's first interval, `MinDelay`.
 *
 * Seed 004 limits the interval "excluding jitter"; we clamp after the jitter
 * too, so `capMs` is a hard bound like in every other strategy.
 * @see seed 004 (smira, "Exponential backoff", `delay = min(delay * Factor, MaxDelay) + norm_variate(delay * Jitter)`)
 */
export function normalJitterDelay(
  { retry, previousDelayMs, random }: BackoffInput,
  options: Pick<BackoffOptions, 'baseMs' | 'capMs' | 'factor' | 'jitter'>,
): number {
  const { capMs, factor, jitter } = options;
  const d =
    previousDelayMs === undefined
      ? exponentialCeiling(retry, options)
      : Math.min(previousDelayMs * factor, capMs);
  return clampDelay(d + standardNormal(random) * d * jitter, capMs);
}
