import { computeDelay, type BackoffPolicy } from './backoff/index.js';
import type { Random } from '../util/system.js';

/**
 * How requeue's connections wait between reconnection attempts: equal jitter
 * from 100 ms, doubling, capped at 2 s. Jittered, so that a fleet that lost
 * its Redis together does not knock on it together when it comes back;
 * capped low, so that work resumes within about 2 s of Redis answering again;
 * half of each wait fixed, so that a Redis that refuses at once is never
 * hammered in a tight loop (full jitter may draw 0 ms). ioredis's own default
 * is a fixed `min(times · 50, 2000)` ms, with no jitter.
 */
export const reconnectBackoff: BackoffPolicy = {
  strategy: 'equal-jitter',
  baseMs: 100,
  capMs: 2_000,
  factor: 2,
  jitter: 0,
  randomMs: 0,
};

/**
 * The wait in whole milliseconds before reconnection attempt `times`
 * (1-based, as ioredis's `retryStrategy` counts; it starts again at 1 once a
 * connection is ready): in `[ceiling / 2, ceiling]` with
 * `ceiling = min(capMs, baseMs · 2^(times − 1))`.
 */
export function reconnectDelay(
  times: number,
  random: Random,
  policy: BackoffPolicy = reconnectBackoff,
): number {
  const retry = Number.isFinite(times) && times >= 1 ? Math.floor(times) - 1 : 0;
  return Math.round(computeDelay(policy, { retry, random }));
}
