import { uniform } from '../../util/random.js';
import type { BackoffInput, BackoffOptions } from './backoff.js';

/**
 * A fixed list of delays, one per retry (the last repeated), each spread
 * uniformly by `± jitter` of itself so that a fleet does not retry in waves:
 * `scheduleMs[min(retry, n-1)] · (1 + jitter · u)`, `u` uniform in `[-1, 1)`.
 * @see Svix's retry schedule (https://docs.svix.com/retries): immediately, 5 s,
 *   5 min, 30 min, 2 h, 5 h, 10 h, 10 h (the webhook default puts 1 s, 5 s and
 *   30 s in front of its 5 min step)
 */
export function scheduleDelay(
  { retry, random }: BackoffInput,
  { scheduleMs, baseMs, jitter }: Pick<BackoffOptions, 'scheduleMs' | 'baseMs' | 'jitter'>,
): number {
  const steps = scheduleMs ?? [baseMs];
  const step = steps[Math.min(retry, steps.length - 1)] ?? baseMs;
  return step * (1 + jitter * uniform(random, -1, 1));
}
