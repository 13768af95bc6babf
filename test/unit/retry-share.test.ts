import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  earnCredit,
  fadeCredit,
  msPerCredit,
  settleCredit,
  spendableJobs,
  type RetryShare,
} from '../../src/policy/retry-share.js';

const rule: RetryShare = { share: 0.5, windowMs: 5_000 };

describe('retry share credit', () => {
  it('earns share per job fetched and spends whole jobs', () => {
    let credit = earnCredit(rule, 0, 3);
    expect(credit).toBe(1.5);
    expect(spendableJobs(credit)).toBe(1);
    credit -= 1;
    expect(settleCredit(credit, 1, 0)).toBe(1.5);
    expect(settleCredit(credit, 1, 1)).toBe(0.5);
    expect(spendableJobs(-0.2)).toBe(0);
  });

  it('fades unspent credit with its time constant, and not backwards', () => {
    expect(fadeCredit(rule, 100, 5_000)).toBeCloseTo(100 / Math.E, 9);
    expect(fadeCredit(rule, 100, 0)).toBe(100);
    expect(fadeCredit(rule, 100, -10)).toBe(100);
    expect(fadeCredit(rule, 100, Number.POSITIVE_INFINITY)).toBe(0);
  });

  it('moves at most share of the jobs fetched, plus nothing banked, however many retries are due', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0.01, max: 1, noNaN: true }),
        fc.array(
          fc.record({
            fetched: fc.integer({ min: 0, max: 50 }),
            due: fc.nat(100),
            gapMs: fc.nat(100),
          }),
          { maxLength: 200 },
        ),
        (share, steps) => {
          const r = { share, windowMs: 1_000 };
          let credit = 0;
          let fetched = 0;
          let moved = 0;
          for (const step of steps) {
            credit = earnCredit(r, fadeCredit(r, credit, step.gapMs), step.fetched);
            fetched += step.fetched;
            const reserved = spendableJobs(credit);
            credit -= reserved;
            const m = Math.min(reserved, step.due);
            moved += m;
            credit = settleCredit(credit, reserved, m);
            expect(credit).toBeGreaterThanOrEqual(0);
          }
          expect(moved).toBeLessThanOrEqual(share * fetched + 1e-9);
        },
      ),
    );
  });
});

describe('msPerCredit (how long a held retry is put off per retry ahead of it)', () => {
  it('is the time one credit takes at the measured fetch rate, 0 while the rate is unknown', () => {
    expect(msPerCredit({ share: 0.5, windowMs: 5_000 }, 0.4)).toBe(5);
    expect(msPerCredit({ share: 1, windowMs: 5_000 }, 2)).toBe(0.5);
    expect(msPerCredit({ share: 0.5, windowMs: 5_000 }, 0)).toBe(0);
  });
});
