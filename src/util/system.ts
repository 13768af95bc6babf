import { randomFillSync } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';
/**
 * The one module that reads the machine's clock and random source. Everything
 * else receives a {@link Clock} and a {@link Random}, so tests can pin both.
 */

/** A source of uniform numbers in `[0, 1)`. */
export type Random = () => number;

/** A source of the current time in milliseconds since the epoch. */
export interface Clock {
  now(): number;
}

/** The process's clock. */
export const systemClock: Clock = { now: () => Date.now() };

/** The process's random source (not for cryptography). */
export const systemRandom: Random = () => Math.random();

/**
 * A new job id, unique and time-ordered (a UUIDv7): given at the producer so
 * that an add re-sent after a reconnect finds its job instead of making a
 * second one.
 */
export function newJobId(): string {
  return uuidv7({ random: randomBytes16() });
}

/** Random bytes for ids, drawn 4 KiB at a time: one system call per 256 ids, not one per id. */
const pool = Buffer.alloc(4096);
let poolOffset = pool.length;
function randomBytes16(): Uint8Array {
  if (poolOffset + 16 > pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  poolOffset += 16;
  return pool.subarray(poolOffset - 16, poolOffset);
}
