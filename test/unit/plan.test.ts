import { describe, expect, it } from 'vitest';
import { simulatePlan } from '../../src/policy/plan.js';
import { parseRetryPolicy } from '../../src/policy/retry-policy.js';
import { seededRandom } from '../../src/util/random.js';
import { quantile, summarize } from '../../src/util/stats.js';

function expectRelClose(actual: number | undefined, expected: number, rel: number): void {
  expect(actual).toBeDefined();
  expect(Math.abs((actual ?? NaN) - expected)).toBeLessThanOrEqual(rel * Math.abs(expected));
}

describe('quantile (linear interpolation, type 7)', () => {
  const sorted = [1, 2, 3, 4];

  it('interpolates between the closest ranks', () => {
    expect(quantile(sorted, 0)).toBe(1);
    expect(quantile(sorted, 0.5)).toBe(2.5);
    expect(quantile(sorted, 0.9)).toBeCloseTo(3.7, 12);
    expect(quantile(sorted, 1)).toBe(4);
    expect(quantile([7], 0.99)).toBe(7);
  });

  it('rejects an empty sample and q outside [0, 1]', () => {
    expect(() => quantile([], 0.5)).toThrow(RangeError);
    expect(() => quantile(sorted, 1.5)).toThrow(RangeError);
    expect(() => quantile(sorted, NaN)).toThrow(RangeError);
  });
});

describe('summarize', () => {
  it('gives min, p50, p90, p99, max and mean without reordering its input', () => {
    const values = [10, 2, 30, 4, 1];
    expect(summarize(values)).toEqual({
      min: 1,
      p50: 4,
      p90: quantile([1, 2, 4, 10, 30], 0.9),
      p99: quantile([1, 2, 4, 10, 30], 0.99),
      max: 30,
      mean: 9.4,
    });
    expect(values).toEqual([10, 2, 30, 4, 1]);
  });

  it('sorts numerically, not as strings', () => {
    expect(summarize([100, 9, 20]).p50).toBe(20);
  });

  it('rejects an empty sample', () => {
    expect(() => summarize([])).toThrow(RangeError);
  });
});

describe('simulatePlan', () => {
  const plan = (input: object, samples = 200_000, seed = 11) =>
    simulatePlan(parseRetryPolicy(input), { samples, random: seededRandom(seed) });

  it('has one row per retry: maxAttempts − 1', () => {
    expect(plan({ maxAttempts: 6 }, 10).retries.map((r) => r.retry)).toEqual([0, 1, 2, 3, 4]);
    expect(plan({ maxAttempts: 1 }, 10).retries).toEqual([]);
  });

  it('gives the exact schedule for exponential, with cumulative sums', () => {
    const { retries } = plan(
      { strategy: 'exponential', baseMs: 100, capMs: 500, maxAttempts: 5 },
      1000,
    );
    const delays = [100, 200, 400, 500];
    const cumulative = [100, 300, 700, 1200];
    retries.forEach((r, i) => {
      for (const stat of [r.min, r.p50, r.p90, r.p99, r.max, r.mean]) expect(stat).toBe(delays[i]);
      expect(r.cumulative).toEqual({ p50: cumulative[i], p99: cumulative[i], mean: cumulative[i] });
    });
  });

  it('matches the full-jitter formula: mean e/2 per retry, cumulative mean the running sum', () => {
    const { retries } = plan({ strategy: 'full-jitter', baseMs: 100, capMs: 2000, maxAttempts: 7 });
    let sum = 0;
    retries.forEach((r, n) => {
      const e = Math.min(2000, 100 * 2 ** n);
      sum += e / 2;
      expectRelClose(r.mean, e / 2, 0.01);
      expect(Math.abs(r.p50 - e / 2)).toBeLessThanOrEqual(0.005 * e);
      expect(Math.abs(r.p90 - 0.9 * e)).toBeLessThanOrEqual(0.005 * e);
      expect(r.min).toBeGreaterThanOrEqual(0);
      expect(r.max).toBeLessThanOrEqual(e);
      expectRelClose(r.cumulative.mean, sum, 0.01);
    });
  });

  it('carries each job’s previous delay for decorrelated jitter: E[D(k+1)] = (base + 3 E[D(k)]) / 2', () => {
    const { retries } = plan({
      strategy: 'decorrelated-jitter',
      baseMs: 100,
      capMs: 1e7,
      maxAttempts: 5,
    });
    const expected = [200, 350, 575, 912.5];
    retries.forEach((r, k) => expectRelClose(r.mean, expected[k] ?? NaN, 0.01));
  });

  it('carries each job’s previous delay for normal jitter: E[D(k)] = base · factor^k', () => {
    const { retries } = plan({
      strategy: 'normal-jitter',
      baseMs: 100,
      capMs: 1e7,
      factor: 3,
      maxAttempts: 5,
    });
    retries.forEach((r, k) => expectRelClose(r.mean, 100 * 3 ** k, 0.01));
  });

  it('is repeatable with the same seed and differs with another', () => {
    const policy = { strategy: 'equal-jitter', maxAttempts: 4 };
    expect(plan(policy, 5000, 3)).toEqual(plan(policy, 5000, 3));
    expect(plan(policy, 5000, 3)).not.toEqual(plan(policy, 5000, 4));
  });

  it('reports gaveUp only with maxElapsedMs: the share of jobs past the window', () => {
    expect(plan({ maxAttempts: 3 }, 100).retries[0]).not.toHaveProperty('gaveUp');
    const exact = plan(
      { strategy: 'fixed', baseMs: 1000, maxAttempts: 6, maxElapsedMs: 3000 },
      100,
    ).retries.map((r) => r.gaveUp);
    // Cumulative 1000, 2000, 3000 (on the boundary: still retries), 4000, 5000.
    expect(exact).toEqual([0, 0, 0, 1, 1]);
    const jittered = plan({ baseMs: 1000, maxAttempts: 6, maxElapsedMs: 5000 }, 20_000).retries;
    const shares = jittered.map((r) => r.gaveUp ?? NaN);
    expect(shares[0]).toBe(0);
    for (let i = 1; i < shares.length; i++)
      expect(shares[i]).toBeGreaterThanOrEqual(shares[i - 1] ?? 0);
    expect(shares[4]).toBeGreaterThan(0.5);
  });

  it('handles a million samples', () => {
    const { retries } = plan({ strategy: 'full-jitter', baseMs: 100, maxAttempts: 3 }, 1_000_000);
    expectRelClose(retries[1]?.mean, 100, 0.005);
  });

  it('rejects a sample count that is not an integer ≥ 1', () => {
    for (const samples of [0, -1, 1.5, NaN]) {
      expect(() => plan({}, samples)).toThrow(RangeError);
    }
  });
});
