import type { RedisClient } from './connection.js';
import { parseWindowHash, type WindowGeometry, type WindowHash } from '../policy/window.js';
import * as lua from './lua-commands.js';

/**
 * Typed wrappers of the scripts that write the fleet's sliding windows, and
 * the one way to read a window. Writers run in Lua on Redis's clock; readers
 * take the hash and Redis's `TIME` in one MULTI and sum in TypeScript
 * (`src/policy/window.ts`), so looking at a window never changes it.
 *
 * `atMs` replaces Redis's clock. It exists for tests that need to place
 * writes at chosen times; production code never passes it.
 */

/** A window as read, with Redis's time of the read. */
export interface WindowRead {
  window: WindowHash;
  nowMs: number;
}

/**
 * Reads a window and Redis's clock in one round trip. No write, no script
 * and no MULTI, so a user whose Redis ACL allows only reads can run every
 * status command; the two replies are microseconds apart, well inside a bucket.
 */
export async function readWindow(redis: RedisClient, key: string): Promise<WindowRead> {
  const results = await redis.pipeline().hgetall(key).time().exec();
  const [hash, time] = results ?? [];
  if (!hash || !time || hash[0] || time[0])
    throw hash?.[0] ?? time?.[0] ?? new Error(`requeue: reading ${key} was aborted`);
  return {
    window: parseWindowHash(hash[1] as Record<string, string>),
    nowMs: redisTimeMs(time[1] as [string, string]),
  };
}

/** Redis's `TIME` reply in ms, as the scripts compute it. */
export function redisTimeMs([seconds, micros]: readonly [string, string]): number {
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/** What `breakerRecord` returns, parsed. */
export interface BreakerRecordResult {
  total: number;
  failures: number;
  consecutiveFailures: number;
  /** The breaker's state JSON ('' when none) and version, read in the same step. */
  rawState: string;
  version: number;
  /** The geometry the window really has (the stored one wins). */
  geometry: WindowGeometry;
}

/** The keys `breakerRecord` touches. */
export interface BreakerRecordKeys {
  window: string;
  state: string;
  /** The seen-keys sorted set. */
  seenKeys: string;
  openKeys: string;
  /** Prefix of every key's state hash, for the idle trim. */
  statePrefix: string;
}

/** Adds a batch of outcomes to a breaker's window. */
export async function recordBreakerWindow(
  redis: RedisClient,
  keys: BreakerRecordKeys,
  args: {
    geometry: WindowGeometry;
    total: number;
    failures: number;
    trailingFailures: number;
    hadSuccess: boolean;
    breakerKey: string;
    /** Attempts in the batch, when `total` is what they add (`countJob`); `total` when absent. */
    attempts?: number;
    /** State and window expire this long after the write; none when absent. */
    idleMs?: number;
  },
  atMs?: number,
): Promise<BreakerRecordResult> {
  const reply = await lua.breakerRecord(
    redis,
    [keys.window, keys.state, keys.seenKeys, keys.openKeys],
    [
      args.geometry.bucketMs,
      args.geometry.buckets,
      args.total,
      args.failures,
      args.trailingFailures,
      args.hadSuccess ? 1 : 0,
      args.breakerKey,
      atMs ?? '',
      args.attempts ?? '',
      args.idleMs ?? '',
      keys.statePrefix,
    ],
  );
  const [total, failures, consecutiveFailures, rawState, version, bucketMs, buckets] = reply;
  return {
    total,
    failures,
    consecutiveFailures,
    rawState,
    version,
    geometry: { bucketMs, buckets },
  };
}

/** What `ratioBudget` returns, parsed. */
export interface RatioBudgetResult {
  granted: boolean;
  requests: number;
  retries: number;
  geometry: WindowGeometry;
}

/** Counts requests and, if asked, takes one retry from a ratio budget's window. */
export async function ratioBudgetScript(
  redis: RedisClient,
  key: string,
  args: {
    geometry: WindowGeometry;
    requests: number;
    take: boolean;
    ratio: number;
    minRetries: number;
  },
  atMs?: number,
): Promise<RatioBudgetResult> {
  const [granted, requests, retries, bucketMs, buckets] = await lua.ratioBudget(redis, key, [
    args.geometry.bucketMs,
    args.geometry.buckets,
    args.requests,
    args.take ? 1 : 0,
    args.ratio,
    args.minRetries,
    atMs ?? '',
  ]);
  return { granted: granted === 1, requests, retries, geometry: { bucketMs, buckets } };
}

/** Takes `cost` tokens from a token bucket of `capacity`. */
export async function takeTokensScript(
  redis: RedisClient,
  key: string,
  capacity: number,
  cost: number,
): Promise<{ granted: boolean; tokens: number; denied: number }> {
  const [granted, tokens, denied] = await lua.budgetTake(redis, key, capacity, cost);
  return { granted: granted === 1, tokens, denied };
}

/** Gives `amount` tokens back to a token bucket, never above `capacity`. */
export async function refundTokensScript(
  redis: RedisClient,
  key: string,
  capacity: number,
  amount: number,
): Promise<number> {
  return lua.budgetRefund(redis, key, capacity, amount);
}
