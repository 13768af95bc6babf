import { DelayedError, Queue, type QueueOptions } from 'bullmq';
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
 * BullMQ's `DelayedError`: what a processor throws once requeue has moved the
 * job itself (BullMQ only checks its type and leaves the job where it is).
 */
export { DelayedError };

/** A {@link DelayedError} with `message`. */
export function delayedError(message: string): Error {
  return new DelayedError(message);
}
