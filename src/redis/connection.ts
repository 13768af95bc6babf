import { Redis, type RedisOptions } from 'ioredis';
import { reconnectDelay } from '../policy/reconnect.js';
import { systemRandom } from '../util/system.js';

/** The Redis requeue talks to when none is given. */
export const defaultRedisUrl = 'redis://127.0.0.1:6379';

/** A Redis to use: a URL, or a connection the caller owns and closes. */
export type RedisLike = string | Redis;

/**
 * ioredis's `retryStrategy` for every long-lived connection requeue opens:
 * {@link reconnectDelay}'s capped, jittered wait, never giving up (a worker
 * outlives a Redis restart). Duplicates BullMQ makes inherit it.
 */
export function reconnectStrategy(times: number): number {
  return reconnectDelay(times, systemRandom);
}

/**
 * Opens an ioredis connection as BullMQ wants it: `maxRetriesPerRequest: null`
 * so blocking commands are never cut short, and requeue's own reconnect
 * backoff ({@link reconnectStrategy}).
 */
export function createRedis(
  url: string = process.env.REDIS_URL ?? defaultRedisUrl,
  extra: RedisOptions = {},
): Redis {
  const redis = new Redis(url, {
    maxRetriesPerRequest: null,
    retryStrategy: reconnectStrategy,
    ...extra,
  });
  // A lost connection surfaces as the rejection of each command that meets it
  // (and ioredis reconnects by itself); without a listener, ioredis would
  // also print every failed reconnection as an unhandled error event.
  redis.on('error', () => undefined);
  return redis;
}

/**
 * Resolves a {@link RedisLike} to a connection and says whether the caller
 * opened it (and so must close it).
 */
export function resolveRedis(connection: RedisLike | undefined): { redis: Redis; owned: boolean } {
  if (connection === undefined || typeof connection === 'string') {
    return { redis: createRedis(connection), owned: true };
  }
  return { redis: connection, owned: false };
}
