import type { RedisClient } from './connection.js';
import { run } from './lua-commands.js';
import { int, one, tuple } from './lua-reply.js';

/**
 * The webhook product's scripts (endpoint registry, per-endpoint rate limit,
 * delivery-log retention), typed as every script is in lua-commands.ts.
 */

/** Writes an endpoint record if the stored one is still `expected` ('' for none): 1 written, 0 moved. */
export async function endpointPut(
  redis: RedisClient,
  endpoints: string,
  args: [id: string, expected: string, record: string],
): Promise<number> {
  return one('endpointPut', await run(redis, 'endpointPut', [endpoints], args), int, 'an integer');
}

/** Reserves a key's next rate-limit slot: its time in ms (≤ now: go now). */
export async function rateReserve(
  redis: RedisClient,
  key: string,
  args: [nowMs: number, intervalMs: number, burst: number],
): Promise<number> {
  return one('rateReserve', await run(redis, 'rateReserve', [key], args), int, 'an integer');
}

/** One delivery-log retention batch: [removed, 0], or [-1, lock ms left] when another pass holds the lock. */
export async function trimDeliveryLog(
  redis: RedisClient,
  keys: [index: string, trimLock: string],
  args: [base: string, cutoffMs: number, limit: number, token: string, lockMs: number],
): Promise<[removed: number, lockMsLeft: number]> {
  const reply = await run(redis, 'trimDeliveryLog', keys, args);
  return tuple<[number, number]>('trimDeliveryLog', reply, [int, int], '2 integers');
}
