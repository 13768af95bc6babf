import type { Command } from 'commander';
import { Redis } from 'ioredis';
import { readEnv } from '../config/env.js';
import { defaultRedisUrl } from '../redis/connection.js';

/** Adds `--redis <url>` to a command. */
export function withRedisOption(command: Command): Command {
  return command.option(
    '--redis <url>',
    'Redis URL (default: REDIS_URL, else redis://127.0.0.1:6379)',
  );
}

/** The Redis URL for a command: `--redis`, else `REDIS_URL`, else the local default. */
export function redisUrlFrom(options: { redis?: string }): string {
  return options.redis ?? readEnv().REDIS_URL ?? defaultRedisUrl;
}

let lastConnectionError: Error | undefined;

/**
 * A connection for a one-shot command: a few quick reconnection attempts,
 * then the command fails with one line instead of retrying forever.
 */
export function cliRedis(options: { redis?: string }): Redis {
  const redis = new Redis(redisUrlFrom(options), {
    maxRetriesPerRequest: 1,
    connectTimeout: 3_000,
    retryStrategy: (times) => (times > 2 ? null : 200),
  });
  // The failed command reports the problem, once; ioredis would print each retry.
  redis.on('error', (err: Error) => {
    lastConnectionError = err;
  });
  return redis;
}

/** Runs `fn` with a {@link cliRedis} connection and closes it after. */
export async function withCliRedis<T>(
  options: { redis?: string },
  fn: (redis: Redis) => Promise<T>,
): Promise<T> {
  const redis = cliRedis(options);
  try {
    return await fn(redis);
  } finally {
    redis.disconnect();
  }
}

/** Says why a command failed, naming the connection problem behind "Connection is closed". */
export function describeConnectionFailure(err: Error): string {
  if (/Connection is closed|Reached the max retries/i.test(err.message) && lastConnectionError) {
    return `cannot reach Redis (${lastConnectionError.message})`;
  }
  return err.message;
}
