import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/env.js';
import { strategyNames } from '../../src/policy/backoff/index.js';
import {
  defaultRetryPolicy,
  parseRetryPolicy,
  planNextAttempt,
  type AttemptContext,
  type RetryPolicy,
} from '../../src/policy/retry-policy.js';
import { seededRandom } from '../../src/util/random.js';

/** The reference time of these tests: when the first attempt failed. */
const FIRST_FAILED_AT = Date.UTC(2025, 0, 1, 12, 0, 0);

describe('parseRetryPolicy', () => {
  it('fills in every default', () => {
    const policy = parseRetryPolicy({});
    expect(policy).toEqual({
      strategy: 'full-jitter',
      baseMs: 1000,
      capMs: 30_000,
      factor: 2,
      jitter: 0.1,
      randomMs: 1000,
      maxAttempts: 5,
    });
    expect(policy).toEqual(defaultRetryPolicy);
    expect(Object.isFrozen(defaultRetryPolicy)).toBe(true);
  });

  it('accepts every strategy and a full policy', () => {
    for (const strategy of strategyNames)
      expect(parseRetryPolicy({ strategy }).strategy).toBe(strategy);
    const full = {
      strategy: 'normal-jitter',
      baseMs: 0,
      capMs: 0,
      factor: 1,
      jitter: 1,
      randomMs: 0,
      maxAttempts: 1,
      maxElapsedMs: 0,
    };
    expect(parseRetryPolicy(full)).toEqual(full);
  });

  it.each([
    ['baseMs NaN', { baseMs: NaN }, 'policy.baseMs: '],
    ['baseMs negative', { baseMs: -1 }, 'policy.baseMs: '],
    ['baseMs a string', { baseMs: '100' }, 'policy.baseMs: '],
    ['capMs Infinity', { capMs: Infinity }, 'policy.capMs: '],
    ['capMs < baseMs', { baseMs: 500, capMs: 100 }, 'policy.capMs: capMs must be ≥ baseMs'],
    ['baseMs over the default cap', { baseMs: 60_000 }, 'policy.capMs: capMs must be ≥ baseMs'],
    ['factor below 1', { factor: 0.5 }, 'policy.factor: '],
    ['jitter above 1', { jitter: 1.5 }, 'policy.jitter: '],
    ['jitter negative', { jitter: -0.1 }, 'policy.jitter: '],
    ['randomMs negative', { randomMs: -1 }, 'policy.randomMs: '],
    ['strategy unknown', { strategy: 'nope' }, 'policy.strategy: '],
    ['unknown key', { bogus: 1 }, 'policy: unknown key "bogus"'],
    ['maxAttempts 0', { maxAttempts: 0 }, 'policy.maxAttempts: '],
    ['maxAttempts 1.5', { maxAttempts: 1.5 }, 'policy.maxAttempts: '],
    ['maxAttempts NaN', { maxAttempts: NaN }, 'policy.maxAttempts: '],
    ['maxElapsedMs negative', { maxElapsedMs: -1 }, 'policy.maxElapsedMs: '],
    ['maxElapsedMs Infinity', { maxElapsedMs: Infinity }, 'policy.maxElapsedMs: '],
  ])('rejects %s, naming the field', (_name, input, message) => {
    expect(() => parseRetryPolicy(input)).toThrow(ConfigError);
    expect(() => parseRetryPolicy(input)).toThrow(message);
  });

  it('rejects a policy that is not an object', () => {
    expect(() => parseRetryPolicy('full-jitter')).toThrow(/^policy: /);
  });

  it('names the field under the label it is given', () => {
    expect(() => parseRetryPolicy({ capMs: -5 }, 'queue.policy')).toThrow(
      /^queue\.policy\.capMs: /,
    );
  });
});

describe('planNextAttempt', () => {
  const fixed = parseRetryPolicy({ strategy: 'fixed', baseMs: 1000, maxAttempts: 4 });
  const context = (overrides: Partial<AttemptContext> = {}): AttemptContext => ({
    attemptsMade: 1,
    firstFailedAt: FIRST_FAILED_AT,
    now: FIRST_FAILED_AT,
    random: seededRandom(1),
    ...overrides,
  });

  it('retries after the strategy delay, at now + delay', () => {
    expect(planNextAttempt(fixed, context({ now: FIRST_FAILED_AT + 50 }))).toEqual({
      kind: 'retry',
      delayMs: 1000,
      retryAt: FIRST_FAILED_AT + 1050,
      source: 'strategy',
    });
  });

  it('uses retry index attemptsMade − 1', () => {
    const exponential = parseRetryPolicy({ strategy: 'exponential', baseMs: 100, maxAttempts: 10 });
    const delays = [1, 2, 3, 4].map((attemptsMade) => {
      const decision = planNextAttempt(exponential, context({ attemptsMade }));
      return decision.kind === 'retry' ? decision.delayMs : decision.reason;
    });
    expect(delays).toEqual([100, 200, 400, 800]);
  });

  it('gives up with max-attempts once attemptsMade reaches maxAttempts', () => {
    expect(planNextAttempt(fixed, context({ attemptsMade: 3 })).kind).toBe('retry');
    expect(planNextAttempt(fixed, context({ attemptsMade: 4 }))).toEqual({
      kind: 'give-up',
      reason: 'max-attempts',
    });
    expect(planNextAttempt(fixed, context({ attemptsMade: 9, serverDelayMs: 1 }))).toEqual({
      kind: 'give-up',
      reason: 'max-attempts',
    });
    const once = parseRetryPolicy({ maxAttempts: 1 });
    expect(planNextAttempt(once, context())).toEqual({ kind: 'give-up', reason: 'max-attempts' });
  });

  it('retries exactly at the maxElapsedMs boundary and gives up 1 ms over it', () => {
    const windowed: RetryPolicy = { ...fixed, maxElapsedMs: 10_000 };
    // The retry would start at firstFailedAt + 10 000: still inside the window.
    expect(
      planNextAttempt(windowed, context({ attemptsMade: 2, now: FIRST_FAILED_AT + 9000 })),
    ).toEqual({
      kind: 'retry',
      delayMs: 1000,
      retryAt: FIRST_FAILED_AT + 10_000,
      source: 'strategy',
    });
    expect(
      planNextAttempt(windowed, context({ attemptsMade: 2, now: FIRST_FAILED_AT + 9001 })),
    ).toEqual({
      kind: 'give-up',
      reason: 'max-elapsed',
    });
  });

  it('lets a server-directed delay replace the computed one, above the cap too', () => {
    expect(planNextAttempt(fixed, context({ serverDelayMs: 45_000 }))).toEqual({
      kind: 'retry',
      delayMs: 45_000,
      retryAt: FIRST_FAILED_AT + 45_000,
      source: 'server',
    });
    expect(planNextAttempt(fixed, context({ serverDelayMs: 0 }))).toMatchObject({
      delayMs: 0,
      source: 'server',
    });
    expect(planNextAttempt(fixed, context({ serverDelayMs: -20 }))).toMatchObject({
      delayMs: 0,
      source: 'server',
    });
  });

  it('holds a server-directed delay to maxElapsedMs as well', () => {
    const windowed: RetryPolicy = { ...fixed, maxElapsedMs: 10_000 };
    expect(planNextAttempt(windowed, context({ serverDelayMs: 10_000 })).kind).toBe('retry');
    expect(planNextAttempt(windowed, context({ serverDelayMs: 10_001 }))).toEqual({
      kind: 'give-up',
      reason: 'max-elapsed',
    });
  });

  it('passes the previous delay to the stateful strategies', () => {
    const decorrelated = parseRetryPolicy({
      strategy: 'decorrelated-jitter',
      baseMs: 100,
      capMs: 1e6,
    });
    const nearOne = () => 1 - 2 ** -40;
    const decision = planNextAttempt(
      decorrelated,
      context({ attemptsMade: 3, previousDelayMs: 5000, random: nearOne }),
    );
    expect(decision.kind === 'retry' && Math.round(decision.delayMs)).toBe(15_000);
  });

  it('rejects attemptsMade below 1 or fractional', () => {
    expect(() => planNextAttempt(fixed, context({ attemptsMade: 0 }))).toThrow(RangeError);
    expect(() => planNextAttempt(fixed, context({ attemptsMade: 1.5 }))).toThrow(RangeError);
  });
});
