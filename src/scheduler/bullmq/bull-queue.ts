import { DelayedError, Queue, type QueueOptions } from 'bullmq';
import { isCluster, type RedisClient } from '../../redis/connection.js';
import { bullPrefix } from '../../redis/keys.js';
import { assertSupportedBullmq } from './version.js';

/**
 * The BullMQ values requeue's code outside `src/scheduler/bullmq/` uses, so
 * that this folder stays the only one importing `bullmq` values (lint keeps
 * it so; `import type` is free everywhere).
 */

/** A BullMQ `Queue` for `name`; refuses a BullMQ requeue is not tested with (`version.ts`). */
export function newBullQueue(name: string, opts: QueueOptions): Queue {
  assertSupportedBullmq();
  return new Queue(name, opts);
}

/**
 * A BullMQ `Queue` for reading `name` on `redis` (the CLI's views). Looking
 * never writes: a BullMQ Queue records its meta (version, event stream
 * length) when made, and would even create a typo's queue. A lost connection
 * fails the reads themselves; the queue need not re-emit it.
 */
export function readOnlyBullQueue(name: string, redis: RedisClient): Queue {
  const queue = newBullQueue(name, {
    connection: redis,
    prefix: bullPrefix(name, isCluster(redis)),
    skipMetasUpdate: true,
  });
  queue.on('error', () => undefined);
  return queue;
}

/**
 * BullMQ's `DelayedError`: what a processor throws once requeue has moved the
 * job itself (BullMQ only checks its type and leaves the job where it is).
 */
export { DelayedError };

/** A {@link DelayedError} with `message`. */
export function delayedError(message: string): Error {
  return new DelayedError(message);
}
