import { describe, expect, it } from 'vitest';
import { parseBreakerOptions } from '../../src/policy/breaker/breaker-options.js';
import { parseBudgetOptions } from '../../src/policy/budget/budget-options.js';
import { parseConcurrencyLimit } from '../../src/policy/limit/gradient-options.js';
import { defaultOutageProtection, SlotDispatch } from '../../src/simulate/outage/dispatch.js';
import { simulateOutage, type OutageParams } from '../../src/simulate/outage.js';
import { seed004Outage } from '../harness/outage-params.js';

describe('SlotDispatch', () => {
  it('starts retries first, four of five while first tries wait too, and only while slots are free', () => {
    const limit = parseConcurrencyLimit({ initial: 3 });
    const slots = new SlotDispatch({ limit, concurrency: 100, retryShare: 0.8 });
    for (let c = 0; c < 10; c++) slots.wait(c, false);
    for (let c = 100; c < 110; c++) slots.wait(c, true);
    const order: number[] = [];
    for (let i = 0; i < 12; i++) {
      const client = slots.next();
      order.push(client);
      slots.started();
      slots.succeeded(100, i); // frees the slot again (and grows the limit)
    }
    expect(order).toEqual([100, 0, 101, 102, 103, 104, 1, 105, 106, 107, 108, 2]);
    // Three in flight at a limit of three: nobody else starts.
    const full = new SlotDispatch({ limit, concurrency: 100, retryShare: 0.8 });
    for (let c = 0; c < 5; c++) full.wait(c, false);
    for (let i = 0; i < 3; i++) {
      expect(full.next()).toBe(i);
      full.started();
    }
    expect(full.next()).toBe(-1);
    full.succeeded(100, 0); // one sample of a window of three: the limit stays at 3
    expect(full.next()).toBe(3);
    full.started();
    expect(full.next()).toBe(-1);
  });
});

describe('simulateOutage with protect (seed 004, requeue’s client)', () => {
  const bare = seed004Outage;
  const guarded: OutageParams = {
    ...bare,
    breaker: parseBreakerOptions({}),
    budget: parseBudgetOptions({}),
    protect: defaultOutageProtection(1000),
  };

  it('even fixed-interval retries recover: the server is back 1 s after the resume, the clients when the breaker closes', () => {
    const [fixed] = simulateOutage(['fixed'], bare);
    const [safe] = simulateOutage(['fixed'], guarded);
    expect(fixed).toMatchObject({ protected: false, recovered: false, serverRecovered: false });
    expect(safe).toMatchObject({
      protected: true,
      recovered: true,
      recoveryMs: 8_000,
      serverRecovered: true,
      serverRecoveryMs: 1000,
      peakConcurrency: 137,
      deadLettered: 0,
    });
    // The limit kept the stopped server's backlog to a few dozen connections.
    expect(Math.max(...safe!.perSecond.slice(15, 35).map((s) => s.concurrency))).toBeLessThan(50);
  });

  it('exponential backoff recovers at least as fast protected as bare (bare: never)', () => {
    const [exponential] = simulateOutage(['exponential'], guarded);
    expect(exponential).toMatchObject({
      recovered: true,
      recoveryMs: 8_000,
      serverRecoveryMs: 1000,
    });
  });

  it('is exactly repeatable', () => {
    expect(simulateOutage(['none'], guarded)).toEqual(simulateOutage(['none'], guarded));
  });
});
