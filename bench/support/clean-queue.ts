import type { Redis } from 'ioredis';
import { queueHashTag } from '../../src/redis/keys.js';

/** Deletes every key of queue `name`, its DLQ included (BullMQ's default `bull` prefix). */
export async function cleanQueue(redis: Redis, name: string): Promise<void> {
  for (const pattern of [`bull:${name}:*`, `requeue:${queueHashTag(name)}:*`]) {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await redis.unlink(...keys);
    } while (cursor !== '0');
  }
}
