import type { RetryPolicy } from './retry-policy.js';

const second = 1_000;
const minute = 60 * second;
const hour = 60 * minute;

/**
 * The webhook worker's default retry policy: Svix's schedule — the first
 * attempt at once, then retries after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and
 * 10 h (8 attempts over about 27.6 h) — each step spread by ± 10 % so a fleet
 * does not retry in waves. An endpoint down for 30 s, 10 min or 3 h gets
 * every event once it is back (`test/integration/webhook-schedule.test.ts`).
 * `requeue plan --preset webhook` prints it.
 * @see https://docs.svix.com/retries
 */
export const webhookRetryPolicy: Readonly<RetryPolicy> = Object.freeze({
  strategy: 'schedule',
  scheduleMs: Object.freeze([
    5 * second,
    5 * minute,
    30 * minute,
    2 * hour,
    5 * hour,
    10 * hour,
    10 * hour,
  ]) as number[],
  baseMs: 5 * second,
  capMs: 11 * hour,
  factor: 2,
  jitter: 0.1,
  randomMs: 1_000,
  maxAttempts: 8,
});

/** Named policies `requeue plan --preset` knows. */
export const policyPresets = Object.freeze({ webhook: webhookRetryPolicy });
