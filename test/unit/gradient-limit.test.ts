import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors/config-error.js';
import { parseConcurrencyLimit } from '../../src/policy/limit/gradient-options.js';
import {
  initialGradient,
  nextGradient,
  stepGradient,
  type GradientState,
  type MutableGradientState,
} from '../../src/policy/limit/gradient.js';
import { serverLatencyMs } from '../../src/simulate/server-model.js';

const o = parseConcurrencyLimit({});
const NOW = 1_800_000_000_000;

/** Feeds `n` samples of `latencyMs` with `inFlight` in flight, one ms apart. */
function feed(
  state: GradientState,
  n: number,
  latencyMs: number | ((limit: number) => number),
  inFlight: number | ((limit: number) => number),
  signal: 'success' | 'overload' = 'success',
  ceiling = 500,
  start = NOW,
): GradientState {
  let s = state;
  for (let i = 0; i < n; i++) {
    const l = typeof latencyMs === 'number' ? latencyMs : latencyMs(s.limit);
    const f = typeof inFlight === 'number' ? inFlight : inFlight(s.limit);
    s = nextGradient(s, { signal, latencyMs: l, inFlight: f, now: start + i }, o, ceiling);
  }
  return s;
}

describe('the gradient concurrency limit', () => {
  it('has its defaults and names a bad field', () => {
    expect(o).toEqual({
      floor: 1,
      initial: 10,
      tolerance: 1.5,
      latencyFloorMs: 10,
      relearnMs: 300_000,
    });
    expect(() => parseConcurrencyLimit({ initial: 0 }, 'worker.concurrencyLimit')).toThrow(
      'worker.concurrencyLimit.initial',
    );
    expect(() => parseConcurrencyLimit({ floor: 5, initial: 2 })).toThrow(ConfigError);
    expect(() => parseConcurrencyLimit({ tolerance: 0.5 })).toThrow('concurrencyLimit.tolerance');
  });

  it('starts at initial, never above the worker’s concurrency', () => {
    expect(initialGradient(o, 500).limit).toBe(10);
    expect(initialGradient(o, 4).limit).toBe(4);
  });

  it('learns once per window of max(3, limit) samples: 10 at 100 ms grow it by √10', () => {
    let s = feed(initialGradient(o, 500), 9, 100, 10);
    expect(s.limit).toBe(10);
    s = feed(s, 1, 100, 10);
    expect(s.limit).toBeCloseTo(10 + Math.sqrt(10), 9);
    expect(s.baselineMs).toBe(100);
  });

  it('does not grow while less than half of it is in use (an idle worker)', () => {
    const s = feed(initialGradient(o, 500), 40, 100, 4);
    expect(s.limit).toBe(10);
  });

  it('a handler under latencyFloorMs, seen one at a time in flight, still climbs to concurrency (the no-failures bench held at 10 of 16)', () => {
    const s = feed(initialGradient(o, 16), 100, 0.2, 1, 'success', 16);
    expect(s.limit).toBe(16);
  });

  it('a healthy handler of a few milliseconds (under latencyFloorMs) climbs to the ceiling', () => {
    const jitter = (l: number): number => (l * 7919) % 9; // 0–8 ms, noise
    const s = feed(initialGradient(o, 100), 2_000, jitter, (l) => Math.floor(l), 'success', 100);
    expect(s.limit).toBe(100);
  });

  it('shrinks when latency passes tolerance × the baseline, halfway per window', () => {
    let s = feed(initialGradient(o, 500), 10, 100, 10); // baseline 100, limit 13.16
    const before = s.limit;
    s = feed(s, 13, 400, 13);
    // gradient clamp(1.5 × 100 / 400) = 0.5 → target 6.58 + 3.63; halfway there.
    const target = before * 0.5 + Math.sqrt(before);
    expect(s.limit).toBeCloseTo(before + 0.5 * (target - before), 9);
  });

  it('counts a failure as overload however fast it failed, and ignores a neutral outcome', () => {
    let s = feed(initialGradient(o, 500), 10, 100, 10);
    const before = s.limit;
    const neutral = nextGradient(
      s,
      { signal: 'neutral', latencyMs: 1, inFlight: 13, now: NOW },
      o,
      500,
    );
    expect(neutral).toBe(s);
    s = feed(s, 13, 1, 13, 'overload');
    expect(s.limit).toBeLessThan(before);
  });

  it('in a steady overload settles past the server’s knee, within 90 % of its best throughput', () => {
    // The outage bench's overload server: 200 ms up to 5 in flight, ×1.05 per request beyond.
    const server = {
      minDelayMs: 200,
      concurrencyLimit: 5,
      latencyFactor: 1.05,
      latencyK: 1,
      backlog: 256,
    };
    const latency = (l: number): number => serverLatencyMs(Math.floor(l), server);
    const s = feed(initialGradient(o, 500), 5_000, latency, (l) => Math.floor(l));
    const throughput = (c: number): number => (c * 1000) / serverLatencyMs(c, server);
    let best = 0;
    for (let c = 1; c < 200; c++) best = Math.max(best, throughput(c));
    expect(throughput(Math.floor(s.limit)) / best).toBeGreaterThanOrEqual(0.9);
    expect(s.limit).toBeGreaterThan(13);
    expect(s.limit).toBeLessThan(30);
  });

  it('relearns a dependency that became slower for good, at most ×2 per relearnMs', () => {
    let s = feed(initialGradient(o, 100), 1_000, 100, (l) => Math.floor(l), 'success', 100);
    expect(s.limit).toBe(100);
    // Every answer now takes 1 s at any load: the limit falls, then the baseline rises.
    s = feed(s, 2_000, 1_000, (l) => Math.floor(l), 'success', 100, NOW + 1_000);
    expect(s.baselineMs).toBeLessThan(110);
    const low = s.limit;
    let t = NOW + 10_000;
    for (let i = 0; i < 30; i++) {
      t += 60_000;
      s = feed(s, 200, 1_000, (l) => Math.floor(l), 'success', 100, t);
    }
    expect(s.baselineMs).toBe(1_000);
    expect(low).toBeLessThan(10);
    expect(s.limit).toBe(100);
  });

  it('fast failures do not set the no-load latency: after 500 instant 503s, 20 ms successes climb back to the ceiling within a few windows', () => {
    // The retry-lateness bench: 500 first attempts fail at once, then 20 ms jobs succeed.
    let s = feed(initialGradient(o, 16), 500, 0.5, (l) => Math.floor(l), 'overload', 16);
    expect(s.limit).toBeLessThan(5);
    expect(s.baselineMs).toBe(Infinity);
    let samples = 0;
    while (s.limit < 16 && samples < 200) {
      s = feed(s, 1, 20, (l) => Math.floor(l), 'success', 16, NOW + 1_000 + samples);
      samples += 1;
    }
    // 4 → 6 → 8.4 → 11.3 → 14.7 → 16: five windows of max(3, limit) samples.
    expect(samples).toBeLessThanOrEqual(4 + 6 + 8 + 11 + 14);
    expect(s.limit).toBe(16);
    expect(s.baselineMs).toBe(20);
  });

  it('a dependency failing from the very first call shrinks the limit (no success, no baseline)', () => {
    const fast = feed(initialGradient(o, 100), 10, 1, 10, 'overload', 100);
    expect(fast.limit).toBeLessThan(o.initial);
    const slow = feed(initialGradient(o, 100), 10, 10_000, 10, 'overload', 100);
    expect(slow.limit).toBeLessThan(o.initial);
  });

  it('stays within [floor, ceiling] on every sample', () => {
    let s = initialGradient({ ...o, floor: 2 }, 40);
    let seed = 7;
    for (let i = 0; i < 3_000; i++) {
      seed = (seed * 48271) % 2147483647;
      const r = seed / 2147483647;
      const signal = r < 0.1 ? 'overload' : r < 0.15 ? 'neutral' : 'success';
      s = nextGradient(
        s,
        { signal, latencyMs: r * 2_000, inFlight: Math.floor(r * 50), now: NOW + i },
        { ...o, floor: 2 },
        40,
      );
      expect(s.limit).toBeGreaterThanOrEqual(2);
      expect(s.limit).toBeLessThanOrEqual(40);
    }
  });

  it('stepGradient, in place, takes every state nextGradient takes (the worker’s allocation-free path)', () => {
    const options = { ...o, floor: 2 };
    let pure: GradientState = initialGradient(options, 40);
    const owned: MutableGradientState = { ...initialGradient(options, 40) };
    let seed = 11;
    for (let i = 0; i < 5_000; i++) {
      seed = (seed * 48271) % 2147483647;
      const r = seed / 2147483647;
      const signal = r < 0.1 ? 'overload' : r < 0.15 ? 'neutral' : 'success';
      const sample = {
        signal,
        latencyMs: r * 300,
        inFlight: Math.floor(r * 50),
        now: NOW + i,
      } as const;
      pure = nextGradient(pure, sample, options, 40);
      stepGradient(owned, signal, sample.latencyMs, sample.inFlight, sample.now, options, 40);
      expect(owned).toEqual(pure);
    }
  });
});
