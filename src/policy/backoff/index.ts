import {
  clampDelay,
  type BackoffInput,
  type BackoffOptions,
  type BackoffStrategy,
} from './backoff.js';
import { decorrelatedJitterDelay } from './decorrelated-jitter.js';
import { equalJitterDelay } from './equal-jitter.js';
import { exponentialDelay } from './exponential.js';
import { fixedDelay } from './fixed.js';
import { fullJitterDelay } from './full-jitter.js';
import { googleDelay } from './google.js';
import { linearDelay } from './linear.js';
import { normalJitterDelay } from './normal-jitter.js';
import { scheduleDelay } from './schedule.js';

export type { BackoffInput, BackoffOptions, BackoffStrategy } from './backoff.js';

/**
 * Every strategy's name, as stored with a job: jobs carry names, and workers
 * look the function up here.
 */
export const strategyNames = [
  'fixed',
  'linear',
  'exponential',
  'full-jitter',
  'equal-jitter',
  'decorrelated-jitter',
  'google',
  'normal-jitter',
  'schedule',
] as const;

/** The name of a backoff strategy. */
export type StrategyName = (typeof strategyNames)[number];

const strategies: Record<StrategyName, BackoffStrategy> = {
  fixed: fixedDelay,
  linear: linearDelay,
  exponential: exponentialDelay,
  'full-jitter': fullJitterDelay,
  'equal-jitter': equalJitterDelay,
  'decorrelated-jitter': decorrelatedJitterDelay,
  google: googleDelay,
  'normal-jitter': normalJitterDelay,
  schedule: scheduleDelay,
};

/** What {@link computeDelay} reads from a policy; a `RetryPolicy` is one. */
export interface BackoffPolicy extends BackoffOptions {
  strategy: StrategyName;
}

/**
 * The delay in milliseconds before a retry, by the policy's strategy, always
 * clamped to `[0, capMs]` whatever the strategy returns.
 * @throws RangeError if `previousDelayMs` is given but is not a finite number ≥ 0
 *   (it comes from stored job data, and would otherwise turn into NaN).
 */
export function computeDelay(policy: BackoffPolicy, input: BackoffInput): number {
  const { previousDelayMs } = input;
  if (
    previousDelayMs !== undefined &&
    !(Number.isFinite(previousDelayMs) && previousDelayMs >= 0)
  ) {
    throw new RangeError(`previousDelayMs must be a finite number ≥ 0, got ${previousDelayMs}`);
  }
  return clampDelay(strategies[policy.strategy](input, policy), policy.capMs);
}
