/**
 * Which queues a Redis holds, found by their keys: BullMQ's
 * `bull:<queue>:meta` and `bull:<queue>:id` (`bull:{<queue>}:<queue>:…` on a
 * Cluster) and requeue's own `requeue:{<queue>}:…`. Reads only: SCAN and
 * EXISTS, on every master of a Cluster.
 */
import type { Redis } from 'ioredis';
import { queueNameProblem } from '../policy/queue-name.js';
import { isCluster, type RedisClient } from './connection.js';
import { bullPrefix, defaultBullPrefix, hasHashTag, queueHashTag, requeueKeys } from './keys.js';

/** Keys asked for per SCAN round trip. */
const scanCount = 1000;

/** requeue's own key prefix, as {@link requeueKeys} has it. */
const requeuePrefix = 'requeue';

/** The servers that hold keys: every master of a Cluster, else the one server. */
function servers(redis: RedisClient): Redis[] {
  return isCluster(redis) ? redis.nodes('master') : [redis];
}

/** `text` with Redis's glob characters escaped, for a SCAN MATCH pattern. */
function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}

/** Hands every key matching `pattern` on every server to `onKeys`, until it returns true. */
async function scanAll(
  redis: RedisClient,
  pattern: string,
  onKeys: (keys: string[]) => boolean | void,
): Promise<void> {
  for (const server of servers(redis)) {
    let cursor = '0';
    do {
      const [next, keys] = await server.scan(cursor, 'MATCH', pattern, 'COUNT', scanCount);
      cursor = next;
      if (onKeys(keys) === true) return;
    } while (cursor !== '0');
  }
}

/**
 * The queue a BullMQ key belongs to: `<prefix>:<queue>:<suffix>`, or on a
 * Cluster `<prefix>:{<queue>}:<queue>:<suffix>` (see {@link bullPrefix}).
 */
export function queueOfBullKey(key: string, prefix = defaultBullPrefix): string | undefined {
  if (!key.startsWith(`${prefix}:`)) return undefined;
  const parts = key.slice(prefix.length + 1).split(':');
  if (parts.length === 2) return parts[0];
  if (parts.length === 3 && parts[0] === queueHashTag(parts[1]!)) return parts[1];
  return undefined;
}

/**
 * The queue a requeue key belongs to: `requeue:<tag>:…`, the tag being
 * {@link queueHashTag}'s. `{orders}` is read as queue `orders` (a queue
 * named `{orders}` has the same tag; its BullMQ keys name it).
 */
export function queueOfRequeueKey(key: string): string | undefined {
  if (!key.startsWith(`${requeuePrefix}:`)) return undefined;
  const tag = key.slice(requeuePrefix.length + 1).split(':')[0]!;
  const inner = tag.startsWith('{') && tag.endsWith('}') ? tag.slice(1, -1) : undefined;
  // A name starting with `}` has its braces percent-encoded in the tag.
  const decoded = inner?.startsWith('%7D')
    ? inner.replace(/%7B|%7D/g, (c) => decodeURIComponent(c))
    : undefined;
  const candidates = [decoded, inner, hasHashTag(tag) ? tag : undefined];
  return candidates.find((name) => name !== undefined && queueHashTag(name) === tag);
}

/**
 * Every queue with a BullMQ queue key (`meta`, `id`) or any requeue key,
 * sorted by name. Names no entry point accepts (a `.dlq`, say) are left out.
 */
export async function discoverQueues(redis: RedisClient): Promise<string[]> {
  const found = new Set<string>();
  const add = (name: string | undefined): void => {
    if (name !== undefined && queueNameProblem(name) === undefined) found.add(name);
  };
  for (const suffix of ['meta', 'id'])
    await scanAll(redis, `${defaultBullPrefix}:*:${suffix}`, (keys) =>
      keys.forEach((k) => add(queueOfBullKey(k))),
    );
  await scanAll(redis, `${requeuePrefix}:*`, (keys) =>
    keys.forEach((k) => add(queueOfRequeueKey(k))),
  );
  return [...found].sort();
}

/** Whether `queue` has any BullMQ or requeue key on this Redis. */
export async function queueExists(redis: RedisClient, queue: string): Promise<boolean> {
  const bull = `${bullPrefix(queue, isCluster(redis))}:${queue}`;
  // The usual case, in one round trip: a queue BullMQ has seen has its meta or its id counter.
  if ((await redis.exists(`${bull}:meta`, `${bull}:id`)) > 0) return true;
  const base = requeueKeys(queue).pattern.slice(0, -2);
  for (const pattern of [`${globEscape(bull)}:*`, `${globEscape(base)}:*`]) {
    let seen = false;
    await scanAll(redis, pattern, (keys) => (seen = keys.length > 0));
    if (seen) return true;
  }
  return false;
}
