import { computeDelay } from './backoff/index.js';
import { dueAfter, dueNotBefore } from './due-time.js';
import type { JobState } from './job-state.js';
import type { Random } from '../util/system.js';

/**
 * When a job held back without running comes back. Three reasons:
 * - `breaker` and `pause`: not before the time the circuit or the pause
 *   gives, spread over the next `spreadMs` so that the jobs turned away
 *   together do not all come back in the same instant (which would trip the
 *   circuit again, as `requeue simulate` shows);
 * - `bulkhead`: its key has as many jobs running as it may; it asks again
 *   after an equal-jitter backoff on its consecutive deferrals (100 ms, then
 *   growing to 5 s), so a key saturated for long costs few round trips.
 */
export function deferredUntil(
  input:
    | { reason: 'breaker' | 'pause'; notBefore: number; spreadMs?: number; random: Random }
    | { reason: 'bulkhead'; now: number; consecutive: number; random: Random },
): number {
  if (input.reason === 'bulkhead') {
    const delay = computeDelay(
      { strategy: 'equal-jitter', baseMs: 100, capMs: 5_000, factor: 2, jitter: 0, randomMs: 0 },
      { retry: input.consecutive, random: input.random },
    );
    return dueAfter(input.now, delay).retryAt;
  }
  return dueNotBefore(input.notBefore) + Math.floor(input.random() * (input.spreadMs ?? 1_000));
}

/** How many times in a row the job was deferred just before this attempt (0 if it was not). */
export function consecutiveDeferrals(state: JobState): number {
  const last = state.history.at(-1);
  if (last?.outcome !== 'deferred' || (last.replay ?? 0) !== state.life) return 0;
  return Number(last.details?.count ?? 1);
}
