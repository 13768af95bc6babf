import { randomUUID } from 'node:crypto';
import { inject } from 'vitest';
import { onCleanup } from './cleanup.js';
import { Redis } from 'ioredis';
import { createCluster, isCluster, type RedisClient } from '../../src/redis/connection.js';
import { bullPrefix, requeueKeys } from '../../src/redis/keys.js';
import {
  startRedisServer,
  type RedisServerHandle,
  type RedisServerOptions,
} from '../../src/redis/redis-server.js';

export { startRedisServer };
export type { RedisClient, RedisServerHandle, RedisServerOptions };

/** The Redis the global setup provides for this run. */
export function redisUrl(): string {
  return inject('redisUrl');
}

/** Whether this run's Redis is a Redis Cluster (`REQUEUE_TEST_CLUSTER=1`). */
export function onCluster(): boolean {
  return inject('redisCluster');
}

/** A queue name no other test uses. */
export function uniqueQueueName(prefix = 'test'): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

/** A queue name no other test uses, its keys deleted (through `redis`) after the test. */
export function cleanedQueueName(redis: RedisClient, prefix = 'test'): string {
  const name = uniqueQueueName(prefix);
  onCleanup(() => cleanQueue(redis, name));
  return name;
}

/**
 * Opens a connection to the run's Redis, ready for BullMQ: an ioredis
 * Cluster when the run is on a cluster, else one Redis. Typed as `Redis` so
 * that tests written against one Redis run unchanged on a cluster: a Cluster
 * has the same command methods (each routed by its key), and requeue takes
 * either; code that needs a node's own commands (SCAN, FLUSHALL) must check
 * {@link onCluster}.
 */
export function connect(url = redisUrl()): Redis {
  return onCluster()
    ? (createCluster(url) as unknown as Redis)
    : new Redis(url, { maxRetriesPerRequest: null });
}

/** BullMQ's prefix of queue `name` on `redis` (`bull`, or `bull:{name}` on a cluster). */
export function bullPrefixOf(redis: RedisClient, name: string): string {
  return bullPrefix(name, isCluster(redis));
}

/** The key of job `id`'s hash in queue `name`. */
export function jobKey(redis: RedisClient, name: string, id: string): string {
  return `${bullPrefixOf(redis, name)}:${name}:${id}`;
}

/**
 * Deletes every key of a queue (BullMQ's `<prefix>:<name>:*` and requeue's
 * keys), on every master of a cluster.
 */
export async function cleanQueue(redis: RedisClient, name: string): Promise<void> {
  const nodes = isCluster(redis) ? redis.nodes('master') : [redis];
  const patterns = [`${bullPrefixOf(redis, name)}:${name}:*`, requeueKeys(name).pattern];
  for (const node of nodes) {
    for (const pattern of patterns) {
      let cursor = '0';
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 500);
        cursor = next;
        // One DEL per key: on a cluster keys of one call must share a slot.
        for (const key of keys) await node.del(key);
      } while (cursor !== '0');
    }
  }
}
