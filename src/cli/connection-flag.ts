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
import { connectTimeoutFromEnv, firstReply } from '../redis/check-redis.js';
import { limits } from '../policy/limits.js';
import { CliUsageError, parseNumberFlag } from './cli-error.js';

/** The flags {@link withRedisOption} adds, as commander hands them over. */
export interface RedisFlags {
  redis?: string;
  dataDir?: string;
  cluster?: boolean;
  connectTimeoutMs?: string;
}

/** Adds `--redis <url>`, `--cluster` and `--data-dir <dir>` to a command. */
export function withRedisOption(command: Command): Command {
  return command
    .option(
      '--cluster',
      'the Redis URL names a seed node of a Redis Cluster (default: REDIS_CLUSTER)',
    )
    .hook('preAction', (cmd) => {
      const opts = cmd.opts<RedisFlags>();
      // One switch for everything the command opens (its worker, its metrics):
      // --cluster is REDIS_CLUSTER=1 for this process.
      if (opts.cluster) process.env.REDIS_CLUSTER = '1';
      // Checked before anything runs, in one place for every command that connects.
      if (opts.redis !== undefined) checkRedisUrl(opts.redis);
      connectTimeoutFrom(opts);
    })
    .option(
      '--redis <url>',
      "Redis URL (default: REDIS_URL, else the data directory's embedded Redis while it runs, else redis://127.0.0.1:6379)",
    )
    .option(
      '--data-dir <dir>',
      `the service's data directory, where its embedded Redis is found (default: REQUEUE_DATA_DIR, else ${defaultDataDir})`,
    )
    .option(
      '--connect-timeout-ms <ms>',
      'give up (exit code 2) when Redis has not answered within this long (default: REDIS_CONNECT_TIMEOUT_MS, else 5000)',
    );
}

/** Refuses a `--redis` that is not a `redis://` or `rediss://` URL, naming the flag. */
function checkRedisUrl(value: string): void {
  let protocol: string | undefined;
  try {
    protocol = new URL(value).protocol;
  } catch {
    // Not a URL at all: said below.
  }
  if (protocol !== 'redis:' && protocol !== 'rediss:')
    throw new CliUsageError(
      `--redis: expected a redis:// or rediss:// URL (e.g. redis://127.0.0.1:6379), got "${value}"`,
    );
}

/** How long to wait for Redis's first reply: `--connect-timeout-ms`, else the environment's. */
export function connectTimeoutFrom(options: { connectTimeoutMs?: string }): number {
  return options.connectTimeoutMs === undefined
    ? connectTimeoutFromEnv()
    : parseNumberFlag('--connect-timeout-ms', options.connectTimeoutMs, {
        integer: true,
        min: 1,
        max: limits.timeoutMs,
      });
}

/** The setting a command's Redis URL came from, for its error lines. */
export function redisLabel(options: { redis?: string }): string {
  if (options.redis !== undefined) return '--redis';
  return readEnv().REDIS_URL !== undefined ? 'REDIS_URL' : 'redis';
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
export function cliRedis(options: RedisFlags): RedisClient {
  // requeue's reconnect waits, but a one-shot command gives up after two.
  const retry = (times: number): number | null => (times > 2 ? null : reconnectStrategy(times));
  const url = redisUrlFrom(options);
  const connectTimeout = connectTimeoutFrom(options);
  // ioredis waits this long (2 s by default) for a closed socket to finish closing: the command is done.
  const disconnectTimeout = 100;
  const redis: RedisClient =
    (options.cluster ?? false) || clusterFromEnv()
      ? createCluster(
          url,
          { maxRetriesPerRequest: 1, connectTimeout, disconnectTimeout },
          { clusterRetryStrategy: retry },
        )
      : new Redis(url, {
          maxRetriesPerRequest: 1,
          connectTimeout,
          disconnectTimeout,
          retryStrategy: retry,
        });
  // The failed command reports the problem, once; ioredis would print each retry.
  redis.on('error', (err: Error) => {
    lastConnectionError = err;
  });
  return redis;
}

/**
 * Runs `fn` with a {@link cliRedis} connection and closes it after. Redis
 * must answer first, within `--connect-timeout-ms`: an unreachable or mute
 * server is one line and exit code 2, not a command waiting for ever.
 */
export async function withCliRedis<T>(
  options: RedisFlags,
  fn: (redis: RedisClient) => Promise<T>,
): Promise<T> {
  const redis = cliRedis(options);
  try {
    await firstReply(redis, {
      url: redisUrlFrom(options),
      label: redisLabel(options),
      timeoutMs: connectTimeoutFrom(options),
    });
    return await fn(redis);
  } finally {
    redis.disconnect();
  }
}

/** Says why a command failed, naming the connection problem behind "Connection is closed". */
export function describeConnectionFailure(err: Error): string {
  // Only a Redis Cluster node answers MOVED, or CROSSSLOT to a multi-key command.
  const cluster = /^(MOVED) \d+ |^(CROSSSLOT) /.exec(err.message);
  if (cluster)
    return `Redis answered ${cluster[1] ?? cluster[2]}: it is a Redis Cluster; add --cluster or set REDIS_CLUSTER=1`;
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
