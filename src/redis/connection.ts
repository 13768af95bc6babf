import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { reconnectDelay } from '../policy/reconnect.js';
import { mendClusterReconnect } from './cluster-reconnect.js';
import { systemRandom } from '../util/system.js';

/** The Redis requeue talks to when none is given. */
export const defaultRedisUrl = 'redis://127.0.0.1:6379';

/** A connection requeue works with: one Redis, or an ioredis Redis Cluster. */
export type RedisClient = Redis | Cluster;

/**
 * A Redis to use: a URL (a Cluster's seed node when `REDIS_CLUSTER` is set);
 * ioredis options for one Redis (`{ host, port }`, as BullMQ takes them),
 * opened and closed by requeue; or a connection, one Redis or a Cluster, the
 * caller owns and closes.
 */
export type RedisLike = string | RedisClient | RedisOptions;

/** Whether `REDIS_CLUSTER` asks for a Redis Cluster (`1`, `true`, `yes`, `on`). */
export function clusterFromEnv(env: NodeJS.ProcessEnv = process.env): boolean {
  return /^(1|true|yes|on)$/i.test(env.REDIS_CLUSTER?.trim() ?? '');
}

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
 * The options of one cluster node's connection from a seed URL: its
 * credentials (`redis://user:pass@…`) and TLS (`rediss://`) apply to every
 * node. A Cluster has no database number.
 */
export function clusterNodeOptions(url: string): RedisOptions {
  const parsed = new URL(url);
  const options: RedisOptions = {};
  if (parsed.username) options.username = decodeURIComponent(parsed.username);
  if (parsed.password) options.password = decodeURIComponent(parsed.password);
  if (parsed.protocol === 'rediss:') options.tls = {};
  return options;
}

/**
 * Opens an ioredis Cluster from one seed node's URL, as BullMQ wants it
 * (`maxRetriesPerRequest: null` on every node), with requeue's reconnect
 * backoff when the whole cluster is lost. A single node that goes away is
 * not retried on its own (ioredis's default): its slots are fetched again
 * from the others, which is how a promoted replica is found; a connection
 * made from scratch tries every node the cluster has learned of, and its
 * `connect()` settles once the cluster is ready (`cluster-reconnect.ts`).
 */
export function createCluster(
  url: string = process.env.REDIS_URL ?? defaultRedisUrl,
  extra: RedisOptions = {},
  clusterOptions: ClusterOptions = {},
): Cluster {
  const parsed = new URL(url);
  const cluster = new Cluster([{ host: parsed.hostname, port: Number(parsed.port || 6379) }], {
    clusterRetryStrategy: reconnectStrategy,
    // A command meeting a failover (its master gone, the cluster down until a
    // replica is promoted) is sent again every 200 ms for about 13 s, rather
    // than failing after ioredis's 16 tries 100 ms apart.
    retryDelayOnFailover: 200,
    retryDelayOnClusterDown: 200,
    maxRedirections: 64,
    ...clusterOptions,
    redisOptions: { maxRetriesPerRequest: null, ...clusterNodeOptions(url), ...extra },
  });
  cluster.on('error', () => undefined);
  // A reconnect from scratch (its own, or BullMQ's of a worker's blocking
  // connection) must not hang when the seed is the master that died, or when
  // it meets the cluster before the replica is promoted.
  return mendClusterReconnect(cluster);
}

/**
 * Opens one Redis, or a Cluster when `cluster` is true (by default when
 * `REDIS_CLUSTER` says so), `url` naming a seed node.
 */
export function connectRedis(
  url: string = process.env.REDIS_URL ?? defaultRedisUrl,
  cluster: boolean = clusterFromEnv(),
): RedisClient {
  return cluster ? createCluster(url) : createRedis(url);
}

/**
 * Resolves a {@link RedisLike} to a connection and says whether the caller
 * opened it (and so must close it). A URL opens a Cluster when
 * `REDIS_CLUSTER` is set.
 */
export function resolveRedis(connection: RedisLike | undefined): {
  redis: RedisClient;
  owned: boolean;
} {
  if (connection === undefined || typeof connection === 'string') {
    return { redis: connectRedis(connection), owned: true };
  }
  if (connection instanceof Redis || connection instanceof Cluster) {
    return { redis: connection, owned: false };
  }
  if (typeof connection !== 'object' || connection === null || Array.isArray(connection)) {
    throw new TypeError(
      `connection must be a Redis URL, ioredis options ({ host, port }) or an ioredis Redis or Cluster, not ${connection === null ? 'null' : Array.isArray(connection) ? 'an array' : typeof connection}`,
    );
  }
  if (typeof (connection as { info?: unknown }).info === 'function') {
    // An ioredis client from another copy of the package: used as it is.
    return { redis: connection as unknown as RedisClient, owned: false };
  }
  const redis = new Redis({
    retryStrategy: reconnectStrategy,
    ...connection,
    // BullMQ's blocking fetch needs it; a bounded value would end a worker's wait.
    maxRetriesPerRequest: null,
  });
  redis.on('error', () => undefined);
  return { redis, owned: true };
}

/** Whether `redis` is a Redis Cluster connection. */
export function isCluster(redis: RedisClient): redis is Cluster {
  return redis.isCluster;
}
