import { randomFillSync } from 'node:crypto';
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
 * A new job id, unique and time-ordered: given at the producer so that an add
 * re-sent after a reconnect finds its job instead of making a second one. See
 * {@link jobIdAt}.
 */
export function newJobId(): string {
  return jobIdAt(Date.now(), randomBytes(idRandomChars));
}

/**
 * The 64 characters of an id, in ASCII order (so ids sort as their times do);
 * none is `:`, which BullMQ refuses in an id, and all are safe in a URL.
 */
const idAlphabet = '-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz';
const idTimeChars = 7;
const idRandomChars = 11;

/**
 * The id of a job made at `ms` (milliseconds since the epoch): 18 characters,
 * the millisecond in the first 7 (42 bits, enough until the year 2109) and 66
 * random bits, 6 from each byte of `random`, in the other 11. Ids sort as
 * their times do, like a UUIDv7's, in half its length: every command about a
 * job carries its id (its keys, the scripts' arguments, the events stream),
 * and with 36-character UUIDs Redis spent measurably more per job
 * (`bench/RESULTS.md`). From 1994 until 2109 the first character is a
 * letter, so an id is never an integer (which BullMQ refuses) nor starts with
 * `-`.
 */
export function jobIdAt(ms: number, random: Uint8Array): string {
  let id = '';
  let rest = Math.floor(ms);
  for (let i = 0; i < idTimeChars; i += 1) {
    id = idAlphabet[rest % 64]! + id;
    rest = Math.floor(rest / 64);
  }
  for (let i = 0; i < idRandomChars; i += 1) id += idAlphabet[random[i]! & 63]!;
  return id;
}

/** Random bytes for ids, drawn 4 KiB at a time: one system call per few hundred ids. */
const pool = Buffer.alloc(4096);
let poolOffset = pool.length;
function randomBytes(n: number): Uint8Array {
  if (poolOffset + n > pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  poolOffset += n;
  return pool.subarray(poolOffset - n, poolOffset);
}
