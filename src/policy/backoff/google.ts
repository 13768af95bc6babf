import { uniform } from '../../util/random.js';
import { exponentialCeiling, type BackoffInput, type BackoffOptions } from './backoff.js';

/**
 * Google Cloud's recipe: `min(capMs, baseMs · 2^retry + uniform(0, randomMs))`.
 * The growth is always 2, as documented there; `factor` is not read.
 * @see seed 000 (Memorystore for Valkey, "Exponential backoff") and seed 003
 *   (Core Reporting API, "Implementing Exponential Backoff")
 */
export function googleDelay(
  { retry, random }: BackoffInput,
  { baseMs, capMs, randomMs }: Pick<BackoffOptions, 'baseMs' | 'capMs' | 'randomMs'>,
): number {
  // The ceiling is already ≤ capMs, so adding first and capping after is min(cap, base·2^n + r).
  const exponential = exponentialCeiling(retry, { baseMs, capMs, factor: 2 });
  return Math.min(capMs, exponential + uniform(random, 0, randomMs));
}
