import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { exitReserveMs } from '../../src/util/signals.js';

describe('the exit reserve of a shutdown timeout', () => {
  it('keeps a fifth of the timeout, at most 250 ms, and leaves the close the rest', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 24 * 3600 * 1000 }), (timeoutMs) => {
        const reserve = exitReserveMs(timeoutMs);
        expect(Number.isInteger(reserve)).toBe(true);
        expect(reserve).toBeGreaterThanOrEqual(0);
        expect(reserve).toBeLessThanOrEqual(250);
        expect(reserve).toBeLessThanOrEqual(timeoutMs / 5);
        // The close keeps at least four fifths of the timeout.
        expect(timeoutMs - reserve).toBeGreaterThanOrEqual((timeoutMs * 4) / 5);
      }),
      { seed: 20261126 },
    );
  });

  it('a stalled log reader once made a 1,500 ms shutdown exit at 1,835 ms: the exit now has 250 ms of its own', () => {
    expect(exitReserveMs(1_500)).toBe(250);
    expect(exitReserveMs(30_000)).toBe(250);
    expect(exitReserveMs(500)).toBe(100);
    expect(exitReserveMs(0)).toBe(0);
    expect(exitReserveMs(-5)).toBe(0);
  });
});
