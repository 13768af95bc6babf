import type { RedisClient } from './connection.js';
import { run } from './lua-commands.js';
import { int, one } from './lua-reply.js';

/**
 * An operator's fenced move of one delayed job: 1 done, 0 not delayed any
 * more, -1 changed since read, -2 has a flow parent (delete only).
 */
export async function moveDelayed(
  redis: RedisClient,
  keys: [
    delayed: string,
    wait: string,
    meta: string,
    marker: string,
    events: string,
    prioritized: string,
    priorityCounter: string,
    job: string,
  ],
  args: [
    action: 'promote' | 'remove',
    id: string,
    score: string,
    attemptsMade: number,
    bullPrefix: string,
  ],
): Promise<number> {
  return one('moveDelayed', await run(redis, 'moveDelayed', keys, args), int, 'an integer');
}
