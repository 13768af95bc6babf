import { describe, expect, it } from 'vitest';
import {
  allowsRetry,
  emptyRatioBudget,
  ratioCounts,
  ratioGeometry,
  settleRatio,
  takeRatio,
} from '../../src/policy/budget/ratio-budget.js';
import { fullBucket, refundTokens, takeTokens } from '../../src/policy/budget/token-bucket.js';

/** The reference time of these tests. */
const T0 = Date.UTC(2025, 0, 1, 12, 0, 0);

describe('token bucket', () => {
  it('grants while there are tokens for the cost, then denies and counts the denial', () => {
    let state = fullBucket(10);
    const results: boolean[] = [];
    for (let i = 0; i < 4; i += 1) {
      const take = takeTokens(state, 3);
      results.push(take.granted);
      state = take.state;
    }
    expect(results).toEqual([true, true, true, false]);
    expect(state).toEqual({ tokens: 1, denied: 1 });
  });

  it('refunds never above capacity', () => {
    expect(refundTokens({ tokens: 8, denied: 0 }, 5, 10)).toEqual({ tokens: 10, denied: 0 });
    expect(refundTokens({ tokens: 2, denied: 3 }, 5, 10)).toEqual({ tokens: 7, denied: 3 });
  });

  it('returns new state and leaves the old one alone', () => {
    const state = Object.freeze(fullBucket(5));
    expect(takeTokens(state, 5).state).toEqual({ tokens: 0, denied: 0 });
    expect(refundTokens(state, 1, 5)).not.toBe(state);
    expect(state).toEqual({ tokens: 5, denied: 0 });
  });
});

describe('ratio budget (the SRE book’s rule)', () => {
  const geometry = ratioGeometry(10_000);
  const rule = { ratio: 0.1, minRetries: 0 };

  it('grants while retries + 1 <= max(minRetries, ratio × requests)', () => {
    expect(allowsRetry({ requests: 100, retries: 9 }, rule)).toBe(true);
    expect(allowsRetry({ requests: 100, retries: 10 }, rule)).toBe(false);
    expect(allowsRetry({ requests: 0, retries: 4 }, { ratio: 0.1, minRetries: 5 })).toBe(true);
    expect(allowsRetry({ requests: 0, retries: 5 }, { ratio: 0.1, minRetries: 5 })).toBe(false);
  });

  it('grants exactly 10 retries per 100 requests, and counts only granted ones', () => {
    let state = settleRatio(emptyRatioBudget, 100, T0, geometry);
    let granted = 0;
    for (let i = 0; i < 20; i += 1) {
      const take = takeRatio(state, T0, rule, geometry);
      if (take.granted) granted += 1;
      state = take.state;
    }
    expect(granted).toBe(10);
    expect(ratioCounts(state, T0)).toEqual({ requests: 100, retries: 10 });
  });

  it('forgets requests once they leave the window', () => {
    const state = settleRatio(emptyRatioBudget, 100, T0, geometry);
    expect(takeRatio(state, T0 + 9_999, rule, geometry).granted).toBe(true);
    expect(takeRatio(state, T0 + 10_000, rule, geometry)).toMatchObject({
      granted: false,
      requests: 0,
      retries: 0,
    });
  });
});
