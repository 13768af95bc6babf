import type { RedisClient } from '../../src/redis/connection.js';
import type { StreamFields } from './message.js';

/**
 * The Redis Stream commands the consumer sends, with their replies parsed
 * into plain values. Replies are checked as they are read: a shape we do not
 * expect is an error, not a silently dropped entry.
 */

/** An entry delivered to this consumer. `fields` is undefined for an entry deleted from the stream. */
export interface Delivery {
  id: string;
  fields: StreamFields | undefined;
  /** Times the group has delivered the entry (1 for a first delivery). */
  deliveries: number;
}

/** Creates the group (and the stream) unless it exists. */
export async function createGroup(
  redis: RedisClient,
  stream: string,
  group: string,
  startId: string,
): Promise<void> {
  try {
    await redis.call('XGROUP', 'CREATE', stream, group, startId, 'MKSTREAM');
  } catch (err) {
    if (!String((err as Error).message).startsWith('BUSYGROUP')) throw err;
  }
}

/** `XREADGROUP … STREAMS stream >`: new entries, or none after `blockMs`. */
export async function readNew(
  redis: RedisClient,
  args: { stream: string; group: string; consumer: string; count: number; blockMs: number },
): Promise<Delivery[]> {
  const { stream, group, consumer, count, blockMs } = args;
  const reply = await redis.call(
    'XREADGROUP',
    'GROUP',
    group,
    consumer,
    'COUNT',
    count,
    'BLOCK',
    blockMs,
    'STREAMS',
    stream,
    '>',
  );
  if (reply === null) return [];
  const [first] = asArray(reply, 'XREADGROUP');
  const [, entries] = asArray(first, 'XREADGROUP stream');
  return parseEntries(entries, 'XREADGROUP').map((e) => ({ ...e, deliveries: 1 }));
}

/** One `XAUTOCLAIM` page: entries now owned by `consumer`, and where the next page starts. */
export interface ClaimPage {
  next: string;
  entries: { id: string; fields: StreamFields | undefined }[];
}

/** `XAUTOCLAIM`: takes over entries idle for at least `minIdleMs`, scanning from `start`. */
export async function autoClaim(
  redis: RedisClient,
  args: {
    stream: string;
    group: string;
    consumer: string;
    minIdleMs: number;
    start: string;
    count: number;
  },
): Promise<ClaimPage> {
  const { stream, group, consumer, minIdleMs, start, count } = args;
  const reply = asArray(
    await redis.call('XAUTOCLAIM', stream, group, consumer, minIdleMs, start, 'COUNT', count),
    'XAUTOCLAIM',
  );
  const next = reply[0];
  if (typeof next !== 'string') throw new Error('XAUTOCLAIM: unexpected reply');
  // Entries deleted from the stream come back in reply[2] (Redis 7) and have left the PEL.
  return { next, entries: parseEntries(reply[1], 'XAUTOCLAIM') };
}

/** Delivery counts of `consumer`'s pending entries between `first` and `last`. */
export async function deliveryCounts(
  redis: RedisClient,
  args: {
    stream: string;
    group: string;
    consumer: string;
    first: string;
    last: string;
    count: number;
  },
): Promise<Map<string, number>> {
  const { stream, group, consumer, first, last, count } = args;
  const reply = asArray(
    await redis.call('XPENDING', stream, group, first, last, count, consumer),
    'XPENDING',
  );
  const counts = new Map<string, number>();
  for (const row of reply) {
    const [id, , , delivered] = asArray(row, 'XPENDING row');
    if (typeof id === 'string' && typeof delivered === 'number') counts.set(id, delivered);
  }
  return counts;
}

/**
 * `XCLAIM … JUSTID` of entries this consumer holds: resets their idle time
 * without counting a delivery, so other consumers do not reclaim entries
 * that are merely waiting their turn. With `idleMs` and `retryCount`, sets
 * both instead: a graceful stop uses it to hand unstarted entries back
 * (claimable at once, delivery count as it was).
 */
export async function touch(
  redis: RedisClient,
  args: {
    stream: string;
    group: string;
    consumer: string;
    ids: string[];
    idleMs?: number;
    retryCount?: number;
  },
): Promise<void> {
  const { stream, group, consumer, ids, idleMs, retryCount } = args;
  if (ids.length === 0) return;
  const extra: (string | number)[] = [];
  if (idleMs !== undefined) extra.push('IDLE', idleMs);
  if (retryCount !== undefined) extra.push('RETRYCOUNT', retryCount);
  await redis.call('XCLAIM', stream, group, consumer, 0, ...ids, ...extra, 'JUSTID');
}

/** `XACK`: the number of entries that were pending. */
export async function ack(
  redis: RedisClient,
  args: { stream: string; group: string; ids: string[] },
): Promise<number> {
  if (args.ids.length === 0) return 0;
  return Number(await redis.call('XACK', args.stream, args.group, ...args.ids));
}

function asArray(value: unknown, what: string): unknown[] {
  if (!Array.isArray(value)) throw new Error(`${what}: unexpected reply`);
  return value as unknown[];
}

function parseEntries(
  value: unknown,
  what: string,
): { id: string; fields: StreamFields | undefined }[] {
  return asArray(value, what).map((raw) => {
    const [id, flat] = asArray(raw, `${what} entry`);
    if (typeof id !== 'string') throw new Error(`${what}: entry without an id`);
    return { id, fields: flat === null ? undefined : toFields(asArray(flat, `${what} fields`)) };
  });
}

function toFields(flat: unknown[]): StreamFields {
  const fields: StreamFields = {};
  for (let i = 0; i + 1 < flat.length; i += 2) fields[String(flat[i])] = String(flat[i + 1]);
  return fields;
}
