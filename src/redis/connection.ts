import { Redis, type RedisOptions } from 'ioredis';

/** The Redis requeue talks to when none is given. */
export const defaultRedisUrl = 'redis://127.0.0.1:6379';

/**
 * Opens an ioredis connection as BullMQ wants it: `maxRetriesPerRequest: null`
 * so blocking commands are never cut short.
 */
export function createRedis(url: string = process.env.REDIS_URL ?? defaultRedisUrl, extra: RedisOptions = {}): Redis {
  return new Redis(url, { maxRetriesPerRequest: null, ...extra });
}
