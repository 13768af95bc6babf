import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { strategyNames } from '../../src/policy/backoff/index.js';
import { applyEmptyBudget } from '../../src/policy/decide.js';
import { deferredUntil } from '../../src/policy/deferral.js';
import { dueAfter } from '../../src/policy/due-time.js';
import { parseRetryPolicy, planNextAttempt } from '../../src/policy/retry-policy.js';
import { seededRandom } from '../../src/util/random.js';

/** The reference time of these tests. */
const NOW = Date.UTC(2026, 10, 25, 12, 0, 0);

/** A whole-millisecond clock reading around the reference time. */
const nowArb = fc.integer({ min: NOW - 1e9, max: NOW + 1e9 });
/** Policies with fractional numbers everywhere a fraction is allowed. */
const policyArb = fc
  .record({
    strategy: fc.constantFrom(...strategyNames),
    baseMs: fc.double({ min: 0, max: 60_000, noNaN: true }),
    extraCapMs: fc.double({ min: 0, max: 600_000, noNaN: true }),
    factor: fc.double({ min: 1, max: 4, noNaN: true }),
    jitter: fc.double({ min: 0, max: 1, noNaN: true }),
    randomMs: fc.double({ min: 0, max: 5_000, noNaN: true }),
  })
  .map(({ extraCapMs, ...p }) => ({ ...p, capMs: p.baseMs + extraCapMs, maxAttempts: 100 }));

describe('due times are whole milliseconds', () => {
  it('a retry due 0.00341796875 ms after a whole-millisecond start is due at a whole millisecond (the load chaos flake)', () => {
    // The chaos suite saw `attempt 4 started at 1795612393430, 0.00341796875 ms
    // before its retry was due`: a fractional due time against BullMQ's whole one.
    expect(dueAfter(1795612393000, 429.99658203125)).toEqual({
      delayMs: 430,
      retryAt: 1795612393430,
    });
  });

  it('every retry planNextAttempt computes has an integer delay and due time', () => {
    fc.assert(
      fc.property(
        policyArb,
        nowArb,
        fc.integer({ min: 1, max: 60 }),
        fc.option(fc.double({ min: 0, max: 1e5, noNaN: true }), { nil: undefined }),
        fc.option(fc.double({ min: 0, max: 1e5, noNaN: true }), { nil: undefined }),
        fc.integer(),
        (input, now, attemptsMade, previousDelayMs, serverDelayMs, seed) => {
          const decision = planNextAttempt(parseRetryPolicy(input), {
            attemptsMade,
            firstFailedAt: now,
            now,
            random: seededRandom(seed),
            ...(previousDelayMs !== undefined ? { previousDelayMs } : {}),
            ...(serverDelayMs !== undefined ? { serverDelayMs } : {}),
          });
          if (decision.kind !== 'retry') return;
          expect(Number.isInteger(decision.delayMs)).toBe(true);
          expect(Number.isInteger(decision.retryAt)).toBe(true);
          expect(decision.retryAt).toBe(now + decision.delayMs);
        },
      ),
      { numRuns: 2_000 },
    );
  });

  it('an empty budget pushes a retry to a whole-millisecond cap', () => {
    fc.assert(
      fc.property(
        policyArb,
        nowArb,
        fc.double({ min: 0, max: 1e5, noNaN: true }),
        (input, now, d) => {
          const policy = parseRetryPolicy(input);
          const decision = applyEmptyBudget(
            { kind: 'retry', delayMs: d, retryAt: now + d, source: 'strategy' },
            policy,
            now,
            { onEmpty: 'delay-to-cap', emptyDelayMs: 10_000 },
            () => 0.5,
          );
          if (decision.kind !== 'retry') throw new Error('delay-to-cap must retry');
          expect(Number.isInteger(decision.delayMs)).toBe(true);
          expect(decision.retryAt).toBe(now + decision.delayMs);
        },
      ),
    );
  });

  it('every deferral is due at a whole millisecond, never before what it waits for', () => {
    fc.assert(
      fc.property(
        nowArb,
        fc.double({ min: 0, max: 1e6, noNaN: true }),
        fc.integer({ min: 0, max: 40 }),
        fc.integer(),
        (now, after, consecutive, seed) => {
          const notBefore = now + after;
          for (const reason of ['breaker', 'pause'] as const) {
            const at = deferredUntil({ reason, notBefore, random: seededRandom(seed) });
            expect(Number.isInteger(at)).toBe(true);
            expect(at).toBeGreaterThanOrEqual(notBefore);
          }
          const bulkhead = deferredUntil({
            reason: 'bulkhead',
            now,
            consecutive,
            random: seededRandom(seed),
          });
          expect(Number.isInteger(bulkhead)).toBe(true);
        },
      ),
    );
  });
});
