import { describe, expect, it } from 'vitest';
import { computeDelay } from '../../src/policy/backoff/index.js';
import { simulatePlan } from '../../src/policy/plan.js';
import { parseRetryPolicy, planNextAttempt } from '../../src/policy/retry-policy.js';
import { webhookRetryPolicy } from '../../src/policy/webhook-policy.js';
import { seededRandom } from '../../src/util/random.js';

const steps = [
  1_000, 5_000, 30_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000,
];

describe('the webhook schedule (Svix-like, jittered per step)', () => {
  it('is the schedule: each retry within ± 10 % of its step, 10 attempts', () => {
    const policy = parseRetryPolicy(webhookRetryPolicy);
    expect(policy.maxAttempts).toBe(10);
    const random = seededRandom(11);
    for (let sample = 0; sample < 10_000; sample++) {
      steps.forEach((step, retry) => {
        const delay = computeDelay(policy, { retry, random });
        expect(delay).toBeGreaterThanOrEqual(step * 0.9);
        expect(delay).toBeLessThanOrEqual(step * 1.1);
      });
    }
  });

  it('spans at least 24 hours before it gives up', () => {
    const plan = simulatePlan(parseRetryPolicy(webhookRetryPolicy), {
      samples: 20_000,
      random: seededRandom(3),
    });
    expect(plan.retries).toHaveLength(9);
    const last = plan.retries.at(-1)!;
    expect(last.cumulative.p50).toBeGreaterThan(24 * 3_600_000);
    // Jitter spreads a step: a fleet failing together does not come back together.
    expect(last.max - last.min).toBeGreaterThan(3_600_000);
  });

  it('gives up after the 10th attempt, not before', () => {
    const policy = parseRetryPolicy(webhookRetryPolicy);
    const ctx = { firstFailedAt: 0, now: 0, random: seededRandom(1) };
    expect(planNextAttempt(policy, { ...ctx, attemptsMade: 9 }).kind).toBe('retry');
    expect(planNextAttempt(policy, { ...ctx, attemptsMade: 10 })).toEqual({
      kind: 'give-up',
      reason: 'max-attempts',
    });
  });

  it('repeats its last step past the end of the list', () => {
    const policy = parseRetryPolicy({
      strategy: 'schedule',
      scheduleMs: [10, 20],
      jitter: 0,
      capMs: 100,
      baseMs: 1,
    });
    const random = seededRandom(1);
    expect([0, 1, 2, 9].map((retry) => computeDelay(policy, { retry, random }))).toEqual([
      10, 20, 20, 20,
    ]);
  });

  it('names scheduleMs when a step is over capMs', () => {
    expect(() =>
      parseRetryPolicy({ strategy: 'schedule', scheduleMs: [60_000], capMs: 1_000 }),
    ).toThrow(/policy\.scheduleMs: every step must be ≤ capMs/);
  });
});
