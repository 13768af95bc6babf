import { describe, expect, it } from 'vitest';
import type { BackoffInput, BackoffOptions } from '../../src/policy/backoff/backoff.js';
import { decorrelatedJitterDelay } from '../../src/policy/backoff/decorrelated-jitter.js';
import { equalJitterDelay } from '../../src/policy/backoff/equal-jitter.js';
import { exponentialDelay } from '../../src/policy/backoff/exponential.js';
import { fixedDelay } from '../../src/policy/backoff/fixed.js';
import { fullJitterDelay } from '../../src/policy/backoff/full-jitter.js';
import { googleDelay } from '../../src/policy/backoff/google.js';
import { computeDelay, strategyNames, type BackoffPolicy } from '../../src/policy/backoff/index.js';
import { linearDelay } from '../../src/policy/backoff/linear.js';
import { scheduleDelay } from '../../src/policy/backoff/schedule.js';
import { normalJitterDelay } from '../../src/policy/backoff/normal-jitter.js';
import { seededRandom } from '../../src/util/random.js';
import { quantile } from '../../src/util/stats.js';
import type { Random } from '../../src/util/system.js';

const N = 200_000;
const options: BackoffOptions = { baseMs: 100, capMs: 1e9, factor: 2, jitter: 0.1, randomMs: 1000 };
/** Standard normal quantiles at 0.1 and 0.9. */
const Z90 = 1.2815515655446004;

type Strategy = (input: BackoffInput, options: BackoffOptions) => number;

interface Sample {
  sorted: Float64Array;
  mean: number;
  std: number;
}

/** Draws `N` delays with a seeded random and returns them sorted, with mean and std. */
function draw(strategy: Strategy, input: Omit<BackoffInput, 'random'>, opts = options): Sample {
  const random = seededRandom(20240601);
  const values = new Float64Array(N);
  const args = { ...input, random };
  for (let i = 0; i < N; i++) values[i] = strategy(args, opts);
  const sorted = values.sort();
  let sum = 0;
  for (const v of sorted) sum += v;
  const mean = sum / N;
  let squares = 0;
  for (const v of sorted) squares += (v - mean) ** 2;
  return { sorted, mean, std: Math.sqrt(squares / (N - 1)) };
}

const min = (s: Sample): number => s.sorted[0] ?? NaN;
const max = (s: Sample): number => s.sorted[s.sorted.length - 1] ?? NaN;

function expectRelClose(actual: number, expected: number, rel: number): void {
  expect(Math.abs(actual - expected)).toBeLessThanOrEqual(rel * Math.abs(expected));
}

/**
 * Mean within 1 % and p10, p50, p90 within 0.5 % of the range of a uniform
 * on `[a, b]` (quantile `a + q(b − a)`). The quantile tolerance is over four
 * standard errors at N = 200 000, so no seed should fail it.
 */
function expectUniform(s: Sample, a: number, b: number): void {
  expect(min(s)).toBeGreaterThanOrEqual(a);
  expect(max(s)).toBeLessThanOrEqual(b);
  expectRelClose(s.mean, (a + b) / 2, 0.01);
  for (const q of [0.1, 0.5, 0.9]) {
    expect(Math.abs(quantile(s.sorted, q) - (a + q * (b - a)))).toBeLessThanOrEqual(
      0.005 * (b - a),
    );
  }
}

/** Every sample is exactly `value`. */
function expectConstant(s: Sample, value: number): void {
  expect(min(s)).toBe(value);
  expect(max(s)).toBe(value);
}

describe('fixed', () => {
  it('returns baseMs at every retry', () => {
    for (const retry of [0, 1, 7, 5000]) expectConstant(draw(fixedDelay, { retry }), 100);
  });
});

describe('linear', () => {
  it('is baseMs · (retry + 1), capped', () => {
    expectConstant(draw(linearDelay, { retry: 0 }), 100);
    expectConstant(draw(linearDelay, { retry: 3 }), 400);
    expect(linearDelay({ retry: 5000, random: Math.random }, { ...options, capMs: 2000 })).toBe(
      2000,
    );
  });
});

describe('exponential', () => {
  it('is baseMs · factor^retry, capped', () => {
    expectConstant(draw(exponentialDelay, { retry: 0 }), 100);
    expectConstant(draw(exponentialDelay, { retry: 4 }), 1600);
    expect(exponentialDelay({ retry: 3, random: Math.random }, { ...options, factor: 3 })).toBe(
      2700,
    );
    expect(
      exponentialDelay({ retry: 20, random: Math.random }, { ...options, capMs: 30_000 }),
    ).toBe(30_000);
  });

  it('stays finite and equal to the cap when factor^n overflows (n = 5000)', () => {
    const capped = { ...options, capMs: 30_000 };
    expect(2 ** 5000).toBe(Infinity);
    expect(exponentialDelay({ retry: 5000, random: Math.random }, capped)).toBe(30_000);
    expect(exponentialDelay({ retry: 5000, random: Math.random }, { ...capped, factor: 10 })).toBe(
      30_000,
    );
  });

  it('gives 0, not NaN, for baseMs 0 at n = 5000 (0 · Infinity)', () => {
    expect(exponentialDelay({ retry: 5000, random: Math.random }, { ...options, baseMs: 0 })).toBe(
      0,
    );
  });

  it('is constant with factor 1', () => {
    expectConstant(draw(exponentialDelay, { retry: 9 }, { ...options, factor: 1 }), 100);
  });
});

describe('full-jitter', () => {
  it('is uniform on [0, baseMs · factor^n)', () => {
    for (const retry of [0, 3, 6])
      expectUniform(draw(fullJitterDelay, { retry }), 0, 100 * 2 ** retry);
  });

  it('is uniform on [0, capMs) once the exponential passes the cap', () => {
    const capped = { ...options, capMs: 5000 };
    expectUniform(draw(fullJitterDelay, { retry: 10 }, capped), 0, 5000);
    expectUniform(draw(fullJitterDelay, { retry: 5000 }, capped), 0, 5000);
  });
});

describe('equal-jitter', () => {
  it('is uniform on [e/2, e), e = baseMs · factor^n', () => {
    for (const retry of [0, 3, 6]) {
      const e = 100 * 2 ** retry;
      expectUniform(draw(equalJitterDelay, { retry }), e / 2, e);
    }
  });

  it('is uniform on [cap/2, cap) once capped, also at n = 5000', () => {
    const capped = { ...options, capMs: 5000 };
    expectUniform(draw(equalJitterDelay, { retry: 10 }, capped), 2500, 5000);
    expectUniform(draw(equalJitterDelay, { retry: 5000 }, capped), 2500, 5000);
  });
});

describe('decorrelated-jitter', () => {
  it('is uniform on [baseMs, 3 · baseMs) before any previous delay', () => {
    expectUniform(draw(decorrelatedJitterDelay, { retry: 0 }), 100, 300);
  });

  it('grows from the previous delay it is fed: uniform on [baseMs, 3 · previous)', () => {
    expectUniform(draw(decorrelatedJitterDelay, { retry: 4, previousDelayMs: 250 }), 100, 750);
    expectUniform(draw(decorrelatedJitterDelay, { retry: 1, previousDelayMs: 4000 }), 100, 12_000);
  });

  it('piles the mass above the cap onto the cap', () => {
    // uniform(100, 3000) capped at 1000: P(cap) = 2000 / 2900.
    const s = draw(
      decorrelatedJitterDelay,
      { retry: 2, previousDelayMs: 1000 },
      {
        ...options,
        capMs: 1000,
      },
    );
    expect(min(s)).toBeGreaterThanOrEqual(100);
    expect(max(s)).toBe(1000);
    const p = 900 / 2900;
    // E[min(cap, U)] = P(U < cap) · (base + cap) / 2 + P(U ≥ cap) · cap
    expectRelClose(s.mean, p * 550 + (1 - p) * 1000, 0.01);
    expect(Math.abs(quantile(s.sorted, 0.1) - (100 + 0.1 * 2900))).toBeLessThanOrEqual(15);
    expect(quantile(s.sorted, 0.5)).toBe(1000);
    expect(quantile(s.sorted, 0.9)).toBe(1000);
  });

  it('carries state across a chain: E[D(k+1)] = (base + 3 · E[D(k)]) / 2', () => {
    const random = seededRandom(99);
    const sums = [0, 0, 0];
    let lowest = Infinity;
    for (let i = 0; i < N; i++) {
      let previousDelayMs: number | undefined;
      for (let retry = 0; retry < 3; retry++) {
        const delay = decorrelatedJitterDelay({ retry, previousDelayMs, random }, options);
        lowest = Math.min(lowest, delay);
        sums[retry] = (sums[retry] ?? 0) + delay;
        previousDelayMs = delay;
      }
    }
    expect(lowest).toBeGreaterThanOrEqual(100);
    const means = sums.map((s) => s / N);
    expectRelClose(means[0] ?? NaN, 200, 0.01);
    expectRelClose(means[1] ?? NaN, 350, 0.01);
    expectRelClose(means[2] ?? NaN, 575, 0.01);
  });

  it('with a random near 1 triples each time until the cap; with 0 stays at baseMs', () => {
    const high: Random = () => 1 - 2 ** -40;
    const capped = { ...options, capMs: 5000 };
    let previousDelayMs: number | undefined;
    const seen: number[] = [];
    for (let retry = 0; retry < 6; retry++) {
      previousDelayMs = decorrelatedJitterDelay({ retry, previousDelayMs, random: high }, capped);
      seen.push(Math.round(previousDelayMs));
    }
    expect(seen).toEqual([300, 900, 2700, 5000, 5000, 5000]);
    const zero: Random = () => 0;
    expect(decorrelatedJitterDelay({ retry: 3, previousDelayMs: 900, random: zero }, capped)).toBe(
      100,
    );
  });
});

describe('google', () => {
  it('is baseMs · 2^n plus uniform [0, randomMs)', () => {
    for (const retry of [0, 1, 4]) {
      const e = 100 * 2 ** retry;
      expectUniform(draw(googleDelay, { retry }), e, e + 1000);
    }
  });

  it('ignores factor (the growth is 2, as documented)', () => {
    expectUniform(draw(googleDelay, { retry: 3 }, { ...options, factor: 7 }), 800, 1800);
  });

  it('is capped, and equal to the cap at n = 5000', () => {
    const capped = { ...options, capMs: 30_000 };
    const s = draw(googleDelay, { retry: 8 }, capped); // 25 600 + [0, 1000)
    expectUniform(s, 25_600, 26_600);
    expectConstant(draw(googleDelay, { retry: 5000 }, capped), 30_000);
    const straddling = draw(
      googleDelay,
      { retry: 0 },
      { ...options, baseMs: 29_500, capMs: 30_000 },
    );
    expect(max(straddling)).toBe(30_000);
    expect(min(straddling)).toBeGreaterThanOrEqual(29_500);
  });
});

describe('normal-jitter', () => {
  /** Mean d, std d·jitter and normal quantiles, for parameters where clamping never happens. */
  function expectNormal(s: Sample, d: number, jitter: number): void {
    const sigma = d * jitter;
    expectRelClose(s.mean, d, 0.01);
    expectRelClose(s.std, sigma, 0.02);
    expect(Math.abs(quantile(s.sorted, 0.1) - (d - Z90 * sigma))).toBeLessThanOrEqual(0.02 * sigma);
    expect(Math.abs(quantile(s.sorted, 0.5) - d)).toBeLessThanOrEqual(0.02 * sigma);
    expect(Math.abs(quantile(s.sorted, 0.9) - (d + Z90 * sigma))).toBeLessThanOrEqual(0.02 * sigma);
  }

  it('starts at baseMs (seed 004: the first interval is MinDelay) with normal jitter', () => {
    const s = draw(normalJitterDelay, { retry: 0 });
    expect(min(s)).toBeGreaterThanOrEqual(0);
    expectNormal(s, 100, 0.1);
  });

  it('grows from the previous delay it is fed: d = previous · factor', () => {
    expectNormal(draw(normalJitterDelay, { retry: 3, previousDelayMs: 1234 }), 2468, 0.1);
    expectNormal(
      draw(
        normalJitterDelay,
        { retry: 1, previousDelayMs: 500 },
        { ...options, factor: 2.7, jitter: 0.2 },
      ),
      1350,
      0.2,
    );
  });

  it('falls back to baseMs · factor^n when no previous delay is known', () => {
    expectNormal(draw(normalJitterDelay, { retry: 4 }), 1600, 0.1);
  });

  it('carries state across a chain: E[D(k)] = baseMs · factor^k', () => {
    const random = seededRandom(5);
    const sums = [0, 0, 0, 0];
    for (let i = 0; i < N; i++) {
      let previousDelayMs: number | undefined;
      for (let retry = 0; retry < 4; retry++) {
        previousDelayMs = normalJitterDelay({ retry, previousDelayMs, random }, options);
        sums[retry] = (sums[retry] ?? 0) + previousDelayMs;
      }
    }
    sums.forEach((sum, k) => expectRelClose(sum / N, 100 * 2 ** k, 0.01));
  });

  it('is exactly d with jitter 0', () => {
    expectConstant(
      draw(normalJitterDelay, { retry: 2, previousDelayMs: 300 }, { ...options, jitter: 0 }),
      600,
    );
  });

  it('clamps to [0, capMs] on every sample, at the cap and with jitter 1', () => {
    const capped = { ...options, capMs: 1000 };
    const atCap = draw(normalJitterDelay, { retry: 1, previousDelayMs: 5000 }, capped);
    expect(max(atCap)).toBe(1000);
    expect(quantile(atCap.sorted, 0.5)).toBe(1000); // half the mass is above d = cap
    const wide = draw(normalJitterDelay, { retry: 0 }, { ...options, jitter: 1 });
    expect(min(wide)).toBe(0);
    const overflow = draw(normalJitterDelay, { retry: 5000 }, capped);
    expect(min(overflow)).toBeGreaterThan(0);
    expect(max(overflow)).toBe(1000);
  });
});

describe('computeDelay', () => {
  const policy = (
    strategy: BackoffPolicy['strategy'],
    overrides: Partial<BackoffOptions> = {},
  ) => ({
    strategy,
    ...options,
    capMs: 30_000,
    ...overrides,
  });
  const direct: Record<BackoffPolicy['strategy'], Strategy> = {
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

  it('dispatches each strategy name to its function', () => {
    for (const name of strategyNames) {
      for (const [retry, previousDelayMs] of [
        [0, undefined],
        [3, 700],
      ] as const) {
        const viaRegistry = computeDelay(policy(name), {
          retry,
          previousDelayMs,
          random: seededRandom(1),
        });
        const viaFunction = direct[name](
          { retry, previousDelayMs, random: seededRandom(1) },
          policy(name),
        );
        expect(viaRegistry, name).toBe(viaFunction);
      }
    }
  });

  it('keeps every strategy in [0, capMs] and finite, for retries 0 to 60 and 5000, at extreme randoms', () => {
    const randoms: Random[] = [() => 0, () => 1 - 2 ** -53, () => 0.5, seededRandom(3)];
    for (const name of strategyNames) {
      for (const random of randoms) {
        let previousDelayMs: number | undefined;
        for (const retry of [...Array(61).keys(), 5000]) {
          const delay = computeDelay(policy(name, { jitter: 1 }), {
            retry,
            previousDelayMs,
            random,
          });
          expect(Number.isFinite(delay), `${name} retry ${retry}`).toBe(true);
          expect(delay).toBeGreaterThanOrEqual(0);
          expect(delay).toBeLessThanOrEqual(30_000);
          previousDelayMs = delay;
        }
      }
    }
  });

  it('clamps to the cap even when a strategy would exceed it (fixed with baseMs > capMs)', () => {
    expect(
      computeDelay(policy('fixed', { baseMs: 50_000 }), { retry: 0, random: Math.random }),
    ).toBe(30_000);
  });

  it('rejects a previous delay that is not a finite number ≥ 0', () => {
    for (const previousDelayMs of [NaN, -1, Infinity]) {
      expect(() =>
        computeDelay(policy('decorrelated-jitter'), {
          retry: 1,
          previousDelayMs,
          random: Math.random,
        }),
      ).toThrow(/previousDelayMs/);
    }
  });
});
