import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/env.js';
import {
  parseBudgetOptions,
  retryCost,
  successRefund,
} from '../../src/policy/budget/budget-options.js';
import { applyEmptyBudget } from '../../src/policy/decide.js';
import { parseRetryPolicy } from '../../src/policy/retry-policy.js';

/** The reference time of these tests: when the retry is decided. */
const NOW = Date.UTC(2025, 0, 1, 12, 0, 0);

describe('budget options', () => {
  it("defaults to the AWS SDK's retry quota: 500 tokens, retry 5, timeout 10, refund 1", () => {
    expect(parseBudgetOptions({})).toEqual({
      kind: 'token-bucket',
      capacity: 500,
      retryCost: 5,
      timeoutCost: 10,
      successRefund: 1,
      onEmpty: 'delay',
      emptyDelayMs: 10_000,
    });
    expect(parseBudgetOptions({ kind: 'token-bucket' })).toEqual(parseBudgetOptions({}));
  });

  it('fills in the ratio budget’s defaults', () => {
    expect(parseBudgetOptions({ kind: 'ratio' })).toEqual({
      kind: 'ratio',
      ratio: 0.1,
      windowMs: 10_000,
      minRetries: 10,
      onEmpty: 'delay',
      emptyDelayMs: 10_000,
    });
  });

  it.each([
    [{ capacity: 0 }, 'budget.capacity'],
    [{ capacity: 2.5 }, 'budget.capacity'],
    [{ retryCost: -1 }, 'budget.retryCost'],
    [{ timeoutCost: -1 }, 'budget.timeoutCost'],
    [{ successRefund: -1 }, 'budget.successRefund'],
    [{ onEmpty: 'drop' }, 'budget.onEmpty'],
    [{ kind: 'ratio', ratio: 0 }, 'budget.ratio'],
    [{ kind: 'ratio', ratio: 1.5 }, 'budget.ratio'],
    [{ kind: 'ratio', windowMs: 0 }, 'budget.windowMs'],
    [{ kind: 'ratio', minRetries: -1 }, 'budget.minRetries'],
    [{ kind: 'leaky' }, 'budget.kind'],
  ])('rejects %j naming %s', (input, field) => {
    expect(() => parseBudgetOptions(input)).toThrow(ConfigError);
    expect(() => parseBudgetOptions(input)).toThrow(new RegExp(`^${field.replace('.', '\\.')}: `));
  });

  it('names unknown keys (a ratio field on a token bucket), with the label given', () => {
    expect(() => parseBudgetOptions({ ratio: 0.1 })).toThrow('budget: unknown key "ratio"');
    expect(() => parseBudgetOptions({ capacity: -5 }, '--budget')).toThrow(/^--budget\.capacity: /);
  });
});

describe('retryCost and successRefund', () => {
  const bucket = parseBudgetOptions({});
  const ratio = parseBudgetOptions({ kind: 'ratio' });

  it('a retry costs retryCost, a timeout-caused one timeoutCost', () => {
    expect(retryCost(bucket, false)).toBe(5);
    expect(retryCost(bucket, true)).toBe(10);
    const custom = parseBudgetOptions({ retryCost: 2, timeoutCost: 7 });
    expect(retryCost(custom, false)).toBe(2);
    expect(retryCost(custom, true)).toBe(7);
  });

  it('a first-attempt success refunds successRefund', () => {
    expect(successRefund(bucket, 1, undefined)).toBe(1);
    expect(successRefund(parseBudgetOptions({ successRefund: 3 }), 1, undefined)).toBe(3);
    // Attempt 1 never took tokens: a stale cost does not change its refund.
    expect(successRefund(bucket, 1, 10)).toBe(1);
  });

  it('a successful retry refunds what its retry cost', () => {
    expect(successRefund(bucket, 2, 5)).toBe(5);
    expect(successRefund(bucket, 3, 10)).toBe(10);
    // A retry that took nothing (granted by a budget that was added later) refunds the default cost.
    expect(successRefund(bucket, 2, undefined)).toBe(5);
  });

  it('a ratio budget counts one retry per retry and refunds nothing', () => {
    expect(retryCost(ratio, false)).toBe(1);
    expect(retryCost(ratio, true)).toBe(1);
    expect(successRefund(ratio, 1, undefined)).toBe(0);
    expect(successRefund(ratio, 4, 5)).toBe(0);
  });
});

describe('an empty budget', () => {
  const policy = parseRetryPolicy({ strategy: 'full-jitter', baseMs: 100, capMs: 1_000 });
  const retry = {
    kind: 'retry' as const,
    delayMs: 37,
    retryAt: NOW + 37,
    source: 'strategy' as const,
  };
  const toCap = { onEmpty: 'delay-to-cap' as const, emptyDelayMs: 10_000 };

  it('by default spreads the retry over ½–1 × emptyDelayMs, never the cap (the fleet parked at the cap came back as one herd)', () => {
    const wide = parseRetryPolicy({ strategy: 'fixed', baseMs: 100, capMs: 300_000 });
    const rule = parseBudgetOptions({});
    expect(rule).toMatchObject({ onEmpty: 'delay', emptyDelayMs: 10_000 });
    const delays = [0, 0.25, 0.999].map(
      (r) => (applyEmptyBudget(retry, wide, NOW, rule, () => r) as { delayMs: number }).delayMs,
    );
    expect(delays).toEqual([5_000, 6_250, 9_995]);
    // Bounded by a smaller cap; a longer own delay is kept.
    expect(applyEmptyBudget(retry, policy, NOW, rule, () => 0.999)).toMatchObject({
      delayMs: 1_000,
      source: 'budget',
    });
    const long = { ...retry, delayMs: 20_000, retryAt: NOW + 20_000 };
    expect(applyEmptyBudget(long, wide, NOW, rule, () => 0)).toMatchObject({ delayMs: 20_000 });
  });

  it('pushes the retry to the policy’s cap, marked as the budget’s doing', () => {
    expect(applyEmptyBudget(retry, policy, NOW, toCap, () => 0.5)).toEqual({
      kind: 'retry',
      delayMs: 1_000,
      retryAt: NOW + 1_000,
      source: 'budget',
    });
  });

  it('keeps a longer delay (a server’s Retry-After) rather than shortening it', () => {
    const server = { ...retry, delayMs: 5_000, retryAt: NOW + 5_000, source: 'server' as const };
    expect(applyEmptyBudget(server, policy, NOW, toCap, () => 0.5)).toMatchObject({
      delayMs: 5_000,
      source: 'budget',
    });
  });

  it('or dead-letters it with budget-exhausted', () => {
    expect(
      applyEmptyBudget(retry, policy, NOW, { ...toCap, onEmpty: 'dead-letter' }, () => 0.5),
    ).toEqual({
      kind: 'dead-letter',
      reason: 'budget-exhausted',
    });
  });
});
