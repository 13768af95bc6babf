import { randomUUID } from 'node:crypto';
import { inject } from 'vitest';
import { Redis } from 'ioredis';
import {
  startRedisServer,
  type RedisServerHandle,
  type RedisServerOptions,
} from '../../src/redis/redis-server.js';

export { startRedisServer };
export type { RedisServerHandle, RedisServerOptions };

/** The Redis the global setup provides for this run. */
export function redisUrl(): string {
  return inject('redisUrl');
}

/** A queue name no other test uses. */
export function uniqueQueueName(prefix = 'test'): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

/** Opens a connection to the run's Redis, ready for BullMQ. */
export function connect(url = redisUrl()): Redis {
  return new Redis(url, { maxRetriesPerRequest: null });
}

/** Deletes every key of a queue (BullMQ's `bull:<name>:*` and requeue's keys). */
export async function cleanQueue(redis: Redis, name: string): Promise<void> {
  for (const pattern of [`bull:${name}:*`, `requeue:{${name}}:*`]) {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 500);
      cursor = next;
      if (keys.length > 0) await redis.del(...keys);
    } while (cursor !== '0');
  }
}
