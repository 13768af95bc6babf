import type { Command } from 'commander';
import { Redis } from 'ioredis';
import { readEnv } from '../config/env.js';
import {
  clusterFromEnv,
  createCluster,
  defaultRedisUrl,
  reconnectStrategy,
  type RedisClient,
} from '../redis/connection.js';
import { defaultDataDir, embeddedRedisUrl } from '../redis/embedded-record.js';

/** Adds `--redis <url>`, `--cluster` and `--data-dir <dir>` to a command. */
export function withRedisOption(command: Command): Command {
  return command
    .option(
      '--cluster',
      'the Redis URL names a seed node of a Redis Cluster (default: REDIS_CLUSTER)',
    )
    .hook('preAction', (cmd) => {
      // One switch for everything the command opens (its worker, its metrics):
      // --cluster is REDIS_CLUSTER=1 for this process.
      if (cmd.opts<{ cluster?: boolean }>().cluster) process.env.REDIS_CLUSTER = '1';
    })
    .option(
      '--redis <url>',
      "Redis URL (default: REDIS_URL, else the data directory's embedded Redis while it runs, else redis://127.0.0.1:6379)",
    )
    .option(
      '--data-dir <dir>',
      `the service's data directory, where its embedded Redis is found (default: REQUEUE_DATA_DIR, else ${defaultDataDir})`,
    );
}

/**
 * The Redis URL for a command: `--redis`, else `REDIS_URL`, else the
 * embedded Redis of the data directory (`--data-dir`, `REQUEUE_DATA_DIR`,
 * `./.requeue`) while its server runs, else the local default.
 */
export function redisUrlFrom(options: { redis?: string; dataDir?: string }): string {
  return (
    options.redis ??
    readEnv().REDIS_URL ??
    embeddedRedisUrl(options.dataDir ?? process.env.REQUEUE_DATA_DIR ?? defaultDataDir) ??
    defaultRedisUrl
  );
}

let lastConnectionError: Error | undefined;

/**
 * A connection for a one-shot command: a few quick reconnection attempts,
 * then the command fails with one line instead of retrying forever.
 */
export function cliRedis(options: {
  redis?: string;
  dataDir?: string;
  cluster?: boolean;
}): RedisClient {
  // requeue's reconnect waits, but a one-shot command gives up after two.
  const retry = (times: number): number | null => (times > 2 ? null : reconnectStrategy(times));
  const url = redisUrlFrom(options);
  const redis: RedisClient =
    (options.cluster ?? false) || clusterFromEnv()
      ? createCluster(
          url,
          { maxRetriesPerRequest: 1, connectTimeout: 3_000 },
          { clusterRetryStrategy: retry },
        )
      : new Redis(url, { maxRetriesPerRequest: 1, connectTimeout: 3_000, retryStrategy: retry });
  // The failed command reports the problem, once; ioredis would print each retry.
  redis.on('error', (err: Error) => {
    lastConnectionError = err;
  });
  return redis;
}

/** Runs `fn` with a {@link cliRedis} connection and closes it after. */
export async function withCliRedis<T>(
  options: { redis?: string; dataDir?: string; cluster?: boolean },
  fn: (redis: RedisClient) => Promise<T>,
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
  if (/^MOVED \d+ /.test(err.message))
    return 'Redis answered MOVED: it is a Redis Cluster; add --cluster or set REDIS_CLUSTER=1';
  if (
    /Connection is closed|Reached the max retries|None of startup nodes|Failed to refresh slots/i.test(
      err.message,
    ) &&
    lastConnectionError
  ) {
    return `cannot reach Redis (${lastConnectionError.message})`;
  }
  return err.message;
}
