import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors/config-error.js';
import { simulateFairness, type FairnessParams } from '../../src/simulate/fairness.js';

/** Issue 22's webhook measurement: one endpoint with 50,000 queued, then 10 × 100. */
const defaults: FairnessParams = {
  seed: 7,
  concurrency: 16,
  bigJobs: 50_000,
  smallKeys: 10,
  smallJobs: 100,
  smallAtMs: 1000,
  serviceMs: 100,
};

describe('simulateFairness', () => {
  it('FIFO makes the small keys wait behind the whole backlog; start-time fair queuing keeps them within 1.25× of alone', () => {
    const { results, alone } = simulateFairness(['fifo', 'fair'], defaults);
    const [fifo, fair] = results;
    expect(alone.p99).toBeCloseTo(6039.054, 3);
    expect(fifo!.small.p99).toBeCloseTo(318_247.009, 3);
    expect(fair!.small.p99).toBeCloseTo(6800.118, 3);
    expect(fair!.small.p99 / alone.p99).toBeLessThan(1.25);
    expect(fifo!.small.p99 / alone.p99).toBeGreaterThan(50);
    // The backlogged key pays little for it: every job still runs, the pool never idles.
    expect(fair!.keys[0]!.p99).toBeCloseTo(316_185.873, 3);
    // The same service times in the same order of starts: the last job ends at the same instant.
    expect(fair!.makespanMs).toBe(fifo!.makespanMs);
    expect(fair!.keys.map((k) => [k.key, k.jobs])).toEqual([
      ['big', 50_000],
      ...Array.from({ length: 10 }, (_, i) => [`small-${i + 1}`, 100]),
    ]);
  });

  it('serves keys in turn: a key that arrives starts at the current virtual time, ahead of the backlog’s later tags', () => {
    const tiny = {
      ...defaults,
      concurrency: 1,
      bigJobs: 6,
      smallKeys: 2,
      smallJobs: 2,
      smallAtMs: 0,
    };
    const [fifo, fair] = simulateFairness(['fifo', 'fair'], tiny).results;
    const span = (r: typeof fair) => r!.keys.map((k) => [k.key, k.min, k.max]);
    // FIFO: both small keys wait for all six big jobs.
    expect(fifo!.keys[1]!.min).toBeGreaterThan(fifo!.keys[0]!.max);
    // Fair: after the big key's first job, small-1, small-2, big, small-1, small-2, then the rest of big.
    const [big, s1, s2] = span(fair);
    expect(s1![1]).toBeLessThan(s2![1] as number);
    expect(s2![2]).toBeLessThan(big![2] as number);
    expect(fair!.keys[0]!.max).toBeCloseTo(786.006, 3);
    expect(fair!.keys[2]!.max).toBeCloseTo(408.215, 3);
  });

  it('is exactly repeatable, and another seed gives other figures', () => {
    const small = { ...defaults, bigJobs: 2000 };
    expect(simulateFairness(['fair'], small)).toEqual(simulateFairness(['fair'], small));
    expect(simulateFairness(['fair'], { ...small, seed: 8 }).results[0]!.small.p99).not.toBe(
      simulateFairness(['fair'], small).results[0]!.small.p99,
    );
  });

  it('refuses a run with no small job or too many jobs, naming the fields', () => {
    expect(() => simulateFairness(['fair'], { ...defaults, smallJobs: 0 })).toThrow(ConfigError);
    expect(() => simulateFairness(['fifo', 'fair'], { ...defaults, bigJobs: 2_000_000 })).toThrow(
      /^\(bigJobs \(2000000\) \+ smallKeys \(10\) × smallJobs \(100\)\) × runs \(3/,
    );
  });
});
