import { summarize, type Summary } from '../util/stats.js';
import type { Random } from '../util/system.js';
import { computeDelay } from './backoff/index.js';
import { limits } from './limits.js';
import type { RetryPolicy } from './retry-policy.js';

/** The distribution of one retry's delay over many simulated jobs, in milliseconds. */
export interface RetryStats extends Summary {
  /** 0 for the first retry. */
  retry: number;
  /** Time from the first failure to this retry: the sum of the delays so far. */
  cumulative: Pick<Summary, 'p50' | 'p99' | 'mean'>;
  /**
   * Only when the policy has `maxElapsedMs`: the fraction of jobs that would
   * have given up by this retry (cumulative delay over the window; the time
   * the attempts themselves take is not modelled).
   */
  gaveUp?: number;
}

/** What a policy's delays look like, retry by retry. */
export interface PlanResult {
  policy: RetryPolicy;
  retries: RetryStats[];
}

/** How to simulate: how many jobs, and the random source. */
export interface PlanOptions {
  /** Number of simulated jobs (an integer ≥ 1). */
  samples: number;
  /** Uniform source; a seeded one makes the plan repeatable. */
  random: Random;
}

/**
 * Simulates `samples` jobs that fail every attempt under `policy` and
 * summarises each of their `maxAttempts − 1` retry delays and the time
 * elapsed since the first failure. Each job carries its own previous delay,
 * for the strategies that depend on it. `maxElapsedMs` does not cut delays
 * short; it only feeds `gaveUp`.
 * @throws RangeError if `samples` is not an integer ≥ 1, or `samples × retries`
 *   is over `limits.planDelays`.
 */
export function simulatePlan(policy: RetryPolicy, { samples, random }: PlanOptions): PlanResult {
  if (!Number.isInteger(samples) || samples < 1) {
    throw new RangeError(`samples must be an integer ≥ 1, got ${samples}`);
  }
  // The work is the product: each flag in bounds can still ask for hours (issue 21).
  if (samples * (policy.maxAttempts - 1) > limits.planDelays) {
    throw new RangeError(
      `samples × retries: at most ${limits.planDelays} delays, got ${samples} × ${policy.maxAttempts - 1}`,
    );
  }
  // Retry by retry over all jobs, so memory is a few arrays of `samples`
  // whatever the number of retries.
  const delays = new Float64Array(samples);
  const elapsed = new Float64Array(samples);
  const retries: RetryStats[] = [];
  for (let retry = 0; retry < policy.maxAttempts - 1; retry++) {
    let gaveUp = 0;
    for (let i = 0; i < samples; i++) {
      const previousDelayMs = retry === 0 ? undefined : delays[i];
      const delay = computeDelay(policy, { retry, previousDelayMs, random });
      delays[i] = delay;
      const total = (elapsed[i] ?? 0) + delay;
      elapsed[i] = total;
      if (policy.maxElapsedMs !== undefined && total > policy.maxElapsedMs) gaveUp++;
    }
    const { p50, p99, mean } = summarize(elapsed);
    retries.push({
      retry,
      ...summarize(delays),
      cumulative: { p50, p99, mean },
      ...(policy.maxElapsedMs === undefined ? {} : { gaveUp: gaveUp / samples }),
    });
  }
  return { policy, retries };
}
