import type { RetryPolicy } from './retry-policy.js';

const second = 1_000;
const minute = 60 * second;
const hour = 60 * minute;

/**
 * The webhook worker's default retry policy: Svix's schedule with three
 * quick retries in front — the first attempt at once, then retries after
 * 1 s, 5 s, 30 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h (10 attempts over
 * about 27.6 h) — each step spread by ± 10 % so a fleet does not retry in
 * waves. The quick steps deliver what fails once to three times in a blip
 * (a 503 from a deploy, a 429 with `Retry-After: 1`) within a minute instead
 * of after Svix's 5-minute step; the long ones give an endpoint that is down
 * for 30 s, 10 min or 3 h every event once it is back
 * (`test/integration/webhook-schedule.test.ts`). A dependency that is down,
 * not flaky, is held off by its breaker, not by the schedule.
 * `requeue plan --preset webhook` prints it.
 * @see https://docs.svix.com/retries
 */
export const webhookRetryPolicy: Readonly<RetryPolicy> = Object.freeze({
  strategy: 'schedule',
  scheduleMs: Object.freeze([
    1 * second,
    5 * second,
    30 * second,
    5 * minute,
    30 * minute,
    2 * hour,
    5 * hour,
    10 * hour,
    10 * hour,
  ]) as number[],
  baseMs: 1 * second,
  capMs: 11 * hour,
  factor: 2,
  jitter: 0.1,
  randomMs: 1_000,
  maxAttempts: 10,
});

/** Named policies `requeue plan --preset` knows. */
export const policyPresets = Object.freeze({ webhook: webhookRetryPolicy });
