import { describe, expect, it } from 'vitest';
import { parseConcurrencyLimit } from '../../src/policy/limit/gradient-options.js';
import { initialGradient, nextGradient } from '../../src/policy/limit/gradient.js';
import { WorkerLimit } from '../../src/scheduler/worker-limit.js';

const o = parseConcurrencyLimit({});
const NOW = 1_800_000_000_000;

/** A stand-in for BullMQ's worker that counts its `concurrency` setter's calls. */
class Target {
  sets: number[] = [];
  private value = 0;
  get concurrency(): number {
    return this.value;
  }
  set concurrency(n: number) {
    this.sets.push(n);
    this.value = n;
  }
}

describe('the worker’s own limit (WorkerLimit)', () => {
  it('follows the gradient rule sample for sample, and sets BullMQ’s concurrency only when its integer changes', () => {
    const target = new Target();
    const limit = new WorkerLimit(target, o, 16);
    let pure = initialGradient(o, 16);
    const expected = [Math.floor(pure.limit)];
    let seed = 5;
    for (let i = 0; i < 3_000; i++) {
      seed = (seed * 48271) % 2147483647;
      const r = seed / 2147483647;
      const signal = r < 0.2 ? 'overload' : r < 0.25 ? 'neutral' : 'success';
      const latencyMs = r * 40;
      limit.started();
      limit.finished(latencyMs, signal, NOW + i);
      pure = nextGradient(pure, { signal, latencyMs, inFlight: 1, now: NOW + i }, o, 16);
      expect(limit.limit).toBe(pure.limit);
      const admitted = Math.floor(pure.limit);
      if (admitted !== expected[expected.length - 1]) expected.push(admitted);
    }
    expect(target.sets).toEqual(expected);
    expect(target.sets.length).toBeLessThan(3_000);
    expect(target.concurrency).toBe(Math.floor(pure.limit));
  });
});
