import type { RedisClient } from './connection.js';
import type { BudgetOptions } from '../policy/budget/budget-options.js';
import { ratioCounts, ratioGeometry } from '../policy/budget/ratio-budget.js';
import { windowLengthMs, type WindowGeometry } from '../policy/window.js';
import { requeueKeys } from './keys.js';
import {
  ratioBudgetScript,
  readWindow,
  refundTokensScript,
  takeTokensScript,
} from './window-scripts.js';

/** What `requeue breaker status` shows of the budget. */
export type BudgetStatus =
  | { kind: 'token-bucket'; tokens: number; capacity: number; denied: number }
  | {
      kind: 'ratio';
      requests: number;
      retries: number;
      ratio: number;
      /** The live window's length (the stored geometry's), else the options'. */
      windowMs: number;
    };

/** Optional observers of a {@link BudgetStore}. */
export interface BudgetStoreHooks {
  /**
   * Called on each write to a ratio window whose stored geometry differs
   * from this store's options (another worker's, still live): the stored one
   * is used. @see src/policy/window.ts for the rule.
   */
  onForeignGeometry?: (stored: WindowGeometry, own: WindowGeometry) => void;
}

/**
 * A queue's retry budget in Redis, shared by its workers. Taking a retry is
 * one atomic script; refunds and request counts are sent in batches. The
 * scripts implement the pure state machines of `src/policy/budget/`; the
 * ratio window runs on Redis's clock, one for the fleet.
 */
export class BudgetStore {
  private readonly keys;
  private readonly redis;

  constructor(
    redis: RedisClient,
    readonly queue: string,
    readonly options: BudgetOptions,
    private readonly hooks: BudgetStoreHooks = {},
  ) {
    this.redis = redis;
    this.keys = requeueKeys(queue);
  }

  /**
   * Takes `cost` tokens (or one ratio retry); false when the budget is empty.
   * @param _now ignored, kept for callers of earlier versions: the ratio
   * window runs on Redis's clock.
   */
  async take(cost: number, _now?: number): Promise<boolean> {
    if (this.options.kind === 'token-bucket') {
      const { granted } = await takeTokensScript(
        this.redis,
        this.keys.budget,
        this.options.capacity,
        cost,
      );
      return granted;
    }
    return (await this.ratio(0, true)).granted;
  }

  /**
   * Gives tokens back (token bucket) or counts requests (ratio), in one call
   * per batch. @param _now ignored, as in {@link BudgetStore.take}.
   */
  async settle(refund: number, requests: number, _now?: number): Promise<void> {
    if (this.options.kind === 'token-bucket') {
      if (refund > 0)
        await refundTokensScript(this.redis, this.keys.budget, this.options.capacity, refund);
      return;
    }
    if (requests > 0) await this.ratio(requests, false);
  }

  /**
   * The budget as it stands. A pure read (HMGET, or HGETALL and `TIME`
   * summed in TypeScript): whatever options this store has, nothing is
   * written. @param _now ignored, as in {@link BudgetStore.take}.
   */
  async status(_now?: number): Promise<BudgetStatus> {
    if (this.options.kind === 'token-bucket') {
      const [tokens, denied] = await this.redis.hmget(this.keys.budget, 'tokens', 'denied');
      return {
        kind: 'token-bucket',
        tokens: tokens === null ? this.options.capacity : Number(tokens),
        capacity: this.options.capacity,
        denied: Number(denied ?? 0),
      };
    }
    const { window, nowMs } = await readWindow(this.redis, this.keys.budgetWindow);
    return {
      kind: 'ratio',
      ...ratioCounts(window, nowMs),
      ratio: this.options.ratio,
      windowMs: window.geometry ? windowLengthMs(window.geometry) : this.options.windowMs,
    };
  }

  /** Refills the bucket (or clears the window). */
  async reset(): Promise<void> {
    await this.redis.del(this.keys.budget, this.keys.budgetWindow);
  }

  private async ratio(requests: number, take: boolean) {
    if (this.options.kind !== 'ratio') throw new Error('not a ratio budget');
    const own = ratioGeometry(this.options.windowMs);
    const result = await ratioBudgetScript(this.redis, this.keys.budgetWindow, {
      geometry: own,
      requests,
      take,
      ratio: this.options.ratio,
      minRetries: this.options.minRetries,
    });
    if (result.geometry.bucketMs !== own.bucketMs || result.geometry.buckets !== own.buckets)
      this.hooks.onForeignGeometry?.(result.geometry, own);
    return result;
  }
}
