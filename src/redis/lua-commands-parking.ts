import type { RedisClient } from './connection.js';
import { run } from './lua-commands.js';
import { int, one, tuple } from './lua-reply.js';

/* The parking of saturated keys' jobs (issue 22), typed as every script is in lua-commands.ts. */

/** Parks a saturated key's fetched job and its waiting jobs near the head: how many waiting ones. */
export async function parkKey(
  redis: RedisClient,
  keys: [parkedList: string, parkedIndex: string, prioritized: string, delayed: string],
  // prettier-ignore
  args: [jobPrefix: string, id: string, key: string, dueAtMs: number, nowMs: number, lookAt: number, backstopMs: number],
): Promise<number> {
  return one('parkKey', await run(redis, 'parkKey', keys, args), int, 'an integer');
}

/** What `unparkKeys` returns: jobs released, keys touched, jobs still parked in those keys. */
export type UnparkReply = [released: number, keys: number, parked: number];

/** Releases parked jobs: `count` of `key`'s, or one of each key idle since `staleBeforeMs` (key ''). */
export async function unparkKeys(
  redis: RedisClient,
  // prettier-ignore
  keys: [parkedIndex: string, delayed: string, prioritized: string, priorityCounter: string, marker: string, meta: string, events: string, active: string, wait: string],
  // prettier-ignore
  args: [jobPrefix: string, parkedListPrefix: string, nowMs: number, key: string, count: number, staleBeforeMs: number],
): Promise<UnparkReply> {
  const reply = await run(redis, 'unparkKeys', keys, args);
  return tuple<UnparkReply>('unparkKeys', reply, [int, int, int], '3 integers');
}
