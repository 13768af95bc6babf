import type { RedisClient } from './connection.js';
import { run } from './lua-commands.js';
import { int, one } from './lua-reply.js';

/* Operators' moves of live jobs (issue 24), typed as every script is in lua-commands.ts. */

/** Makes a scheduled retry due now: 1 moved, 0 not delayed, -1 its attempt moved on, -2 parked. */
export async function retryNow(
  redis: RedisClient,
  keys: [delayed: string, marker: string, job: string, meta: string],
  args: [id: string, attemptsStarted: number],
): Promise<number> {
  return one('retryNow', await run(redis, 'retryNow', keys, args), int, 'an integer');
}
