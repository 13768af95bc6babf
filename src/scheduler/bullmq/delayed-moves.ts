import type { RedisClient } from '../../redis/connection.js';
import { moveDelayed } from '../../redis/lua-commands-delayed.js';
import { bullKeys } from './bull-keys.js';

/** What a delayed job looked like when read: the fence an operator's move presents. */
export interface DelayedFence {
  /** BullMQ's delayed score as read (a string: the exact score). */
  score: string;
  /** BullMQ's attempts made (`atm`) as read. */
  attemptsMade: number;
}

/** The result of an operator's move of a delayed job. */
export type DelayedMoveResult =
  | { kind: 'done' }
  /** Not in the delayed set any more (it ran, was deleted, or never was). */
  | { kind: 'gone' }
  /** Still delayed, but rescheduled or retried since it was read. */
  | { kind: 'changed' }
  /** A flow child: deleting it is refused (its parent's bookkeeping is BullMQ's). */
  | { kind: 'has-parent' }
  /** Parked, waiting for its key's slot: run now is refused (its key's release runs it in turn). */
  | { kind: 'parked' };

const results: Record<number, DelayedMoveResult> = {
  1: { kind: 'done' },
  0: { kind: 'gone' },
  [-1]: { kind: 'changed' },
  [-2]: { kind: 'has-parent' },
  [-3]: { kind: 'parked' },
};

/**
 * Runs a delayed job now (`promote`: to the front of the wait list) or
 * deletes it (`remove`), in one script fenced by what was read
 * (`src/redis/lua/moveDelayed-8.lua`): a job that moved on meanwhile is
 * refused, never moved or deleted (promise 2). An id naming no delayed job
 * (or one of BullMQ's keys) is `gone`: the script acts only on a member of
 * the delayed set whose hash is there.
 */
export async function moveDelayedJob(
  redis: RedisClient,
  queue: string,
  action: 'promote' | 'remove',
  id: string,
  fence: DelayedFence,
  prefix = 'bull',
): Promise<DelayedMoveResult> {
  const keys = bullKeys(queue, prefix);
  const reply = await moveDelayed(
    redis,
    [
      keys.delayed,
      keys.wait,
      keys.meta,
      keys.marker,
      keys.events,
      keys.prioritized,
      keys.pc,
      keys.prefix + id,
    ],
    [action, id, fence.score, fence.attemptsMade, keys.prefix],
  );
  const result = results[reply];
  if (!result) throw new Error(`moveDelayed answered ${reply}`);
  return result;
}
