import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseBudgetOptions } from '../../src/policy/budget/budget-options.js';
import {
  emptyRatioBudget,
  settleRatio,
  takeRatio,
  type RatioBudgetState,
  type RatioRule,
} from '../../src/policy/budget/ratio-budget.js';
import {
  fullBucket,
  refundTokens,
  takeTokens,
  type TokenBucketState,
} from '../../src/policy/budget/token-bucket.js';
import { parseWindowHash, type WindowGeometry } from '../../src/policy/window.js';
import { BudgetStore } from '../../src/redis/budget-store.js';
import { requeueKeys } from '../../src/redis/keys.js';
import { ratioBudgetScript } from '../../src/redis/window-scripts.js';
import { cleanedQueueName, connect } from '../harness/redis.js';

/**
 * The budgets' Lua against their spec, the pure state machines of
 * src/policy/budget/: random sequences of take, refund and settle run on
 * both, and after every step the answers and the stored state must be equal.
 */

let redis: Redis;
beforeAll(() => {
  redis = connect();
});
afterAll(() => {
  redis.disconnect();
});

describe('the token bucket in Lua behaves as src/policy/budget/token-bucket.ts', () => {
  interface Model {
    state: TokenBucketState;
  }
  interface Real {
    store: BudgetStore;
  }
  type Cmd = fc.AsyncCommand<Model, Real>;

  async function same(model: Model, real: Real): Promise<void> {
    const status = await real.store.status();
    expect(status).toMatchObject({ kind: 'token-bucket', ...model.state });
  }

  class Take implements Cmd {
    constructor(readonly cost: number) {}
    check = () => true;
    async run(model: Model, real: Real) {
      const next = takeTokens(model.state, this.cost);
      expect(await real.store.take(this.cost)).toBe(next.granted);
      model.state = next.state;
      await same(model, real);
    }
    toString = () => `take(${this.cost})`;
  }

  class Refund implements Cmd {
    constructor(
      readonly amount: number,
      readonly capacity: number,
    ) {}
    check = () => true;
    async run(model: Model, real: Real) {
      // The store sends refunds of 0 nowhere: nothing to refund, nothing written.
      if (this.amount > 0) model.state = refundTokens(model.state, this.amount, this.capacity);
      await real.store.settle(this.amount, 1);
      await same(model, real);
    }
    toString = () => `refund(${this.amount})`;
  }

  it('after every step of a random sequence: same answers, same tokens and denials', async () => {
    const name = cleanedQueueName(redis, 'tb-model');
    await fc.assert(
      fc.asyncProperty(
        fc
          .integer({ min: 1, max: 50 })
          .chain((capacity) =>
            fc.tuple(
              fc.constant(capacity),
              fc.commands(
                [
                  fc.integer({ min: 0, max: 20 }).map((cost): Cmd => new Take(cost)),
                  fc.integer({ min: 0, max: 20 }).map((n): Cmd => new Refund(n, capacity)),
                ],
                { maxCommands: 40 },
              ),
            ),
          ),
        async ([capacity, commands]) => {
          await redis.del(requeueKeys(name).budget);
          const store = new BudgetStore(redis, name, parseBudgetOptions({ capacity }));
          await fc.asyncModelRun(
            () => ({ model: { state: fullBucket(capacity) }, real: { store } }),
            commands,
          );
        },
      ),
      { numRuns: 100 },
    );
  });
});

describe('the ratio budget in Lua behaves as src/policy/budget/ratio-budget.ts', () => {
  interface Model {
    state: RatioBudgetState;
  }
  interface Real {
    redis: Redis;
    key: string;
  }
  type Cmd = fc.AsyncCommand<Model, Real>;

  async function same(model: Model, real: Real): Promise<void> {
    expect(parseWindowHash(await real.redis.hgetall(real.key))).toEqual(model.state);
  }

  /** Each command runs at its own time and proposes its own geometry (another worker's options). */
  class Take implements Cmd {
    constructor(
      readonly atMs: number,
      readonly proposed: WindowGeometry,
      readonly rule: RatioRule,
    ) {}
    check = () => true;
    async run(model: Model, real: Real) {
      const next = takeRatio(model.state, this.atMs, this.rule, this.proposed);
      const got = await ratioBudgetScript(
        real.redis,
        real.key,
        { geometry: this.proposed, requests: 0, take: true, ...this.rule },
        this.atMs,
      );
      expect({ granted: got.granted, requests: got.requests, retries: got.retries }).toEqual({
        granted: next.granted,
        requests: next.requests,
        retries: next.retries,
      });
      model.state = next.state;
      await same(model, real);
    }
    toString = () => `take@${this.atMs}`;
  }

  class Settle implements Cmd {
    constructor(
      readonly atMs: number,
      readonly proposed: WindowGeometry,
      readonly requests: number,
      readonly rule: RatioRule,
    ) {}
    check = () => true;
    async run(model: Model, real: Real) {
      model.state = settleRatio(model.state, this.requests, this.atMs, this.proposed);
      await ratioBudgetScript(
        real.redis,
        real.key,
        { geometry: this.proposed, requests: this.requests, take: false, ...this.rule },
        this.atMs,
      );
      await same(model, real);
    }
    toString = () => `settle(${this.requests})@${this.atMs}`;
  }

  it('after every step of a random sequence at random times: same grants, same window', async () => {
    const name = cleanedQueueName(redis, 'ratio-model');
    const key = requeueKeys(name).budgetWindow;
    // Windows of 10 s and more keep the key's TTL beyond a sequence's real run time.
    const geometry = fc
      .integer({ min: 10_000, max: 60_000 })
      .map((windowMs) => ({ bucketMs: Math.floor(windowMs / 10), buckets: 10 }));
    const rule = fc.record({
      ratio: fc.double({ min: 0.01, max: 1, noNaN: true }),
      minRetries: fc.integer({ min: 0, max: 5 }),
    });
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1_000_000, max: 2 ** 44 }),
        rule,
        fc.array(
          fc.oneof(
            fc.record({
              kind: fc.constant('take' as const),
              offsetMs: fc.integer({ min: -20_000, max: 200_000 }),
              proposed: geometry,
            }),
            fc.record({
              kind: fc.constant('settle' as const),
              offsetMs: fc.integer({ min: -20_000, max: 200_000 }),
              proposed: geometry,
              requests: fc.integer({ min: 0, max: 30 }),
            }),
          ),
          { maxLength: 40 },
        ),
        async (origin, r, steps) => {
          await redis.del(key);
          // Times jump back and forth too, as after a failover to a Redis with another clock.
          const commands = steps.map((s): Cmd =>
            s.kind === 'take'
              ? new Take(origin + s.offsetMs, s.proposed, r)
              : new Settle(origin + s.offsetMs, s.proposed, s.requests, r),
          );
          await fc.asyncModelRun(
            () => ({ model: { state: emptyRatioBudget }, real: { redis, key } }),
            commands,
          );
        },
      ),
      { numRuns: 100 },
    );
  });
});
