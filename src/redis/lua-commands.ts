import type { RedisClient } from './connection.js';
import { int, LuaReplyError, numeric, one, str, strings, strOrInt, tuple } from './lua-reply.js';
import { runScript } from './scripts.js';

export { LuaReplyError } from './lua-reply.js';

/**
 * The one caller of the Lua script runner (issue 23, item 5; lint keeps it
 * so): one typed function per script in `src/redis/lua/`, its keys and
 * arguments named, its reply checked and typed. A reply of the wrong shape
 * throws a {@link LuaReplyError} naming the script, never a cast that lies.
 * The functions only build the call and read the reply: what a state means
 * is decided by their callers.
 */

/** Every script in `src/redis/lua/` (a unit test compares this with the files). */
export const scriptNames = [
  'breakerCas',
  'breakerRecord',
  'budgetRefund',
  'budgetTake',
  'deadLetter',
  'deadPage',
  'endpointPut',
  'fairTrim',
  'limitAcquire',
  'limitRelease',
  'moveDelayed',
  'parkKey',
  'pauseKey',
  'promoteRetries',
  'purgeDead',
  'rateReserve',
  'ratioBudget',
  'replayDead',
  'startLife',
  'trimDeadBatch',
  'unparkKeys',
  'trimDeliveryLog',
] as const;

/** The name of one of requeue's Lua scripts. */
export type ScriptName = (typeof scriptNames)[number];

type Arg = string | number;

/** Runs one of requeue's scripts by name (for the typed functions here and in lua-commands-webhook.ts). */
export function run(
  redis: RedisClient,
  name: ScriptName,
  keys: readonly Arg[],
  args: readonly Arg[],
): Promise<unknown> {
  return runScript<unknown>(redis, name, keys, args);
}

/** Compare-and-set of a breaker's state: 1 when written, 0 when its version moved. */
export async function breakerCas(
  redis: RedisClient,
  keys: [breaker: string, window: string, openKeys: string, isolatedKeys: string],
  args: [
    version: number,
    stateJson: string,
    phase: string,
    breakerKey: string,
    channel: string,
    messageJson: string,
    clearWindow: 0 | 1 | 2,
    idleMs: number | '',
    isolated: 0 | 1,
  ],
): Promise<number> {
  return one('breakerCas', await run(redis, 'breakerCas', keys, args), int, 'an integer');
}

/** What `breakerRecord` returns: the window's sums, the breaker's state and version, the geometry. */
export type BreakerRecordReply = [
  total: number,
  failures: number,
  consecutiveFailures: number,
  rawState: string,
  version: number,
  bucketMs: number,
  buckets: number,
];

/** Adds a batch of outcomes to a breaker's window. */
export async function breakerRecord(
  redis: RedisClient,
  keys: [window: string, state: string, seenKeys: string, openKeys: string],
  args: [
    bucketMs: number,
    buckets: number,
    total: number,
    failures: number,
    trailingFailures: number,
    hadSuccess: 0 | 1,
    breakerKey: string,
    atMs: number | '',
    attempts: number | '',
    idleMs: number | '',
    statePrefix: string,
  ],
): Promise<BreakerRecordReply> {
  const reply = await run(redis, 'breakerRecord', keys, args);
  return tuple<BreakerRecordReply>(
    'breakerRecord',
    reply,
    [int, int, int, str, int, int, int],
    '3 integers, a string, 3 integers',
  );
}

/** Gives tokens back to a bucket; the tokens it then holds. */
export async function budgetRefund(
  redis: RedisClient,
  key: string,
  capacity: number,
  amount: number,
): Promise<number> {
  return one(
    'budgetRefund',
    await run(redis, 'budgetRefund', [key], [capacity, amount]),
    numeric,
    'a number as a string',
  );
}

/** Takes tokens from a bucket: [granted 0/1, tokens left, denials so far]. */
export async function budgetTake(
  redis: RedisClient,
  key: string,
  capacity: number,
  cost: number,
): Promise<[granted: number, tokens: number, denied: number]> {
  const reply = await run(redis, 'budgetTake', [key], [capacity, cost]);
  return tuple<[number, number, number]>(
    'budgetTake',
    reply,
    [int, numeric, int],
    'an integer, a number, an integer',
  );
}

/** The dead-letter move's reply: [1, gen] moved, [2, gen, state] occupied, [3] vanished, [0] lock lost. */
export type DeadLetterReply =
  | [code: 0 | 3]
  | [code: 1, generation: string | number]
  | [code: 2, generation: string | number, state: string];

/** Moves an active job to the DLQ (16 keys, in `deadLetter-16.lua`'s order). */
export async function deadLetter(
  redis: RedisClient,
  keys: readonly string[],
  args: [
    token: string,
    id: string,
    state: string,
    death: string,
    deadAt: number,
    expectedGeneration: string,
    resendGuardMs: number,
    bullPrefix: string,
  ],
): Promise<DeadLetterReply> {
  const reply = await run(redis, 'deadLetter', keys, args);
  const expected = '[0], [1, gen], [2, gen, state] or [3]';
  if (!Array.isArray(reply)) throw new LuaReplyError('deadLetter', expected, reply);
  const [code] = reply;
  if ((code === 0 || code === 3) && reply.length === 1) return [code];
  if (code === 1 && reply.length === 2) return [1, one('deadLetter', reply[1], strOrInt, expected)];
  if (code === 2 && reply.length === 3)
    return [
      2,
      one('deadLetter', reply[1], strOrInt, expected),
      one('deadLetter', reply[2], str, expected),
    ];
  throw new LuaReplyError('deadLetter', expected, reply);
}

/** One page of the dead index, newest first: ids with scores, the count above, the edge groups. */
export async function deadPage(
  redis: RedisClient,
  dead: string,
  args: [max: Arg, min: Arg, offset: number, limit: number],
): Promise<[idsWithScores: string[], above: number, firstGroup: string[], lastGroup: string[]]> {
  const reply = await run(redis, 'deadPage', [dead], args);
  return tuple<[string[], number, string[], string[]]>(
    'deadPage',
    reply,
    [strings, int, strings, strings],
    'strings, an integer, strings, strings',
  );
}

/** Trims the fair-dispatch state below the prioritized set's head: how many entries it removed. */
export async function fairTrim(
  redis: RedisClient,
  prioritized: string,
  fair: string,
): Promise<number> {
  return one('fairTrim', await run(redis, 'fairTrim', [prioritized, fair], []), int, 'an integer');
}

type LimitKeys = [limitKeys: string, limit: string, leases: string];

/** Takes a place under a key's limit: [admitted 0/1, in flight, limit, Redis's now]. */
export async function limitAcquire(
  redis: RedisClient,
  keys: LimitKeys,
  args: [
    key: string,
    token: string,
    floor: number,
    ceiling: number,
    initial: number,
    leaseMs: number,
    idleMs: number,
    atMs: number | '',
  ],
): Promise<[admitted: number, inFlight: number, limit: number, now: number]> {
  const reply = await run(redis, 'limitAcquire', keys, args);
  return tuple<[number, number, number, number]>(
    'limitAcquire',
    reply,
    [int, int, numeric, int],
    'an integer, an integer, a number, an integer',
  );
}

/** Gives a place back and updates the limit: [limit, threshold, decreasedAt, in flight, peak, throttles]. */
export async function limitRelease(
  redis: RedisClient,
  keys: LimitKeys,
  args: [
    key: string,
    token: string,
    signal: string,
    latencyMs: number,
    startedAt: number,
    floor: number,
    ceiling: number,
    initial: number,
    additiveIncrease: number,
    backoffRatio: number,
    latencyTargetMs: number,
    idleMs: number,
    atMs: number | '',
    recoveryMs: number,
  ],
): Promise<
  [
    limit: number,
    threshold: number,
    decreasedAt: number,
    inFlight: number,
    peak: number,
    throttles: number,
  ]
> {
  const reply = await run(redis, 'limitRelease', keys, args);
  return tuple<[number, number, number, number, number, number]>(
    'limitRelease',
    reply,
    [numeric, numeric, int, int, numeric, int],
    'a number, a number, an integer, an integer, a number, an integer',
  );
}

/** Pauses a key until a time: 1 when stored, 0 when a later pause was there. */
export async function pauseKey(
  redis: RedisClient,
  pausedKeys: string,
  args: [key: string, untilMs: number, nowMs: number, channel: string],
): Promise<number> {
  return one('pauseKey', await run(redis, 'pauseKey', [pausedKeys], args), int, 'an integer');
}

/** Promotes due retries: [moved, held, first remaining score or -1]. */
export async function promoteRetries(
  redis: RedisClient,
  keys: [
    delayed: string,
    wait: string,
    meta: string,
    active: string,
    marker: string,
    events: string,
    tail: string,
  ],
  args: [
    bullPrefix: string,
    dueScore: number,
    limit: number,
    holdAboveJobs: number,
    holdScore: number,
    holdStepMs: number,
    maxBlock: number,
    maxHoldMs: number,
  ],
): Promise<[moved: number, held: number, first: number]> {
  const reply = await run(redis, 'promoteRetries', keys, args);
  return tuple<[number, number, number]>(
    'promoteRetries',
    reply,
    [int, int, numeric],
    'an integer, an integer, a score',
  );
}

/** Deletes dead jobs (each if still the death read): how many it removed. */
export async function purgeDead(
  redis: RedisClient,
  dead: string,
  args: readonly Arg[],
): Promise<number> {
  return one('purgeDead', await run(redis, 'purgeDead', [dead], args), int, 'an integer');
}

/** Counts requests and maybe takes a retry: [granted 0/1, requests, retries, bucketMs, buckets]. */
export async function ratioBudget(
  redis: RedisClient,
  key: string,
  args: [
    bucketMs: number,
    buckets: number,
    requests: number,
    take: 0 | 1,
    ratio: number,
    minRetries: number,
    atMs: number | '',
  ],
): Promise<
  [granted: number, requests: number, retries: number, bucketMs: number, buckets: number]
> {
  const reply = await run(redis, 'ratioBudget', [key], args);
  return tuple<[number, number, number, number, number]>(
    'ratioBudget',
    reply,
    [int, int, int, int, int],
    '5 integers',
  );
}

/** Replays dead jobs: a flat list of id, where it went ('' when it did not). */
export async function replayDead(
  redis: RedisClient,
  // prettier-ignore
  keys: [dead: string, wait: string, meta: string, active: string, marker: string, events: string, prioritized: string, pc: string, fair: string],
  args: readonly Arg[],
): Promise<string[]> {
  const reply = await run(redis, 'replayDead', keys, args);
  const list = one('replayDead', reply, strings, 'a list of strings');
  if (list.length % 2 !== 0)
    throw new LuaReplyError('replayDead', 'pairs of id and destination', reply);
  return list;
}

/** Starts a job's new life under its lock: the life, or -1 when the lock is not the token's. */
export async function startLife(
  redis: RedisClient,
  keys: [job: string, lock: string],
  args: [token: string, lifeOffset: number, attemptsMade: number],
): Promise<number> {
  return one('startLife', await run(redis, 'startLife', keys, args), int, 'an integer');
}

/** One retention batch: [removed by age, by count], or [-1, lock ms left] when another pass holds the lock. */
export async function trimDeadBatch(
  redis: RedisClient,
  keys: [dead: string, trimLock: string],
  args: [
    recordPrefix: string,
    cutoffMs: number,
    maxCount: number,
    limit: number,
    token: string,
    lockMs: number,
  ],
): Promise<[byAge: number, byCount: number]> {
  const reply = await run(redis, 'trimDeadBatch', keys, args);
  return tuple<[number, number]>('trimDeadBatch', reply, [int, int], '2 integers');
}
