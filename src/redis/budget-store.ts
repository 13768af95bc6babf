import type { Redis } from 'ioredis';
import type { BudgetOptions } from '../policy/budget/budget-options.js';
import { requeueKeys } from './keys.js';
import { runScript } from './scripts.js';

/** What `requeue breaker status` shows of the budget. */
export type BudgetStatus =
  | { kind: 'token-bucket'; tokens: number; capacity: number; denied: number }
  | { kind: 'ratio'; requests: number; retries: number; ratio: number; windowMs: number };

/**
 * A queue's retry budget in Redis, shared by its workers. Taking a retry is
 * one atomic script; refunds and request counts are sent in batches.
 */
export class BudgetStore {
  private readonly keys;
  private readonly redis;

  constructor(
    redis: Redis,
    readonly queue: string,
    readonly options: BudgetOptions,
  ) {
    this.redis = redis;
    this.keys = requeueKeys(queue);
  }

  /** Takes `cost` tokens (or one ratio retry); false when the budget is empty. */
  async take(cost: number, now: number): Promise<boolean> {
    if (this.options.kind === 'token-bucket') {
      const [granted] = (await runScript(
        this.redis,
        'budgetTake',
        [this.keys.budget],
        [this.options.capacity, cost],
      )) as [number, string];
      return granted === 1;
    }
    const [granted] = (await this.ratio(now, 0, true)) as [number, number, number];
    return granted === 1;
  }

  /** Gives tokens back (token bucket) or counts requests (ratio), in one call per batch. */
  async settle(refund: number, requests: number, now: number): Promise<void> {
    if (this.options.kind === 'token-bucket') {
      if (refund > 0)
        await runScript(
          this.redis,
          'budgetRefund',
          [this.keys.budget],
          [this.options.capacity, refund],
        );
      return;
    }
    if (requests > 0) await this.ratio(now, requests, false);
  }

  async status(now: number): Promise<BudgetStatus> {
    if (this.options.kind === 'token-bucket') {
      const [tokens, denied] = await this.redis.hmget(this.keys.budget, 'tokens', 'denied');
      return {
        kind: 'token-bucket',
        tokens: tokens === null ? this.options.capacity : Number(tokens),
        capacity: this.options.capacity,
        denied: Number(denied ?? 0),
      };
    }
    const [, requests, retries] = (await this.ratio(now, 0, false)) as [number, number, number];
    return {
      kind: 'ratio',
      requests,
      retries,
      ratio: this.options.ratio,
      windowMs: this.options.windowMs,
    };
  }

  /** Refills the bucket (or clears the window). */
  async reset(): Promise<void> {
    await this.redis.del(this.keys.budget, this.keys.budgetWindow);
  }

  private ratio(now: number, requests: number, take: boolean): Promise<unknown> {
    if (this.options.kind !== 'ratio') throw new Error('not a ratio budget');
    const buckets = 10;
    return runScript(
      this.redis,
      'ratioBudget',
      [this.keys.budgetWindow],
      [
        now,
        Math.max(1, Math.floor(this.options.windowMs / buckets)),
        buckets,
        requests,
        take ? 1 : 0,
        this.options.ratio,
        this.options.minRetries,
      ],
    );
  }
}
