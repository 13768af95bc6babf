import { Redis } from 'ioredis';
import { ConfigError } from '../policy/validate.js';
import { redactText, redactUrl } from '../util/redact.js';
import { clusterFromEnv, isCluster, type RedisClient } from './connection.js';

/**
 * Connects once, with a short deadline and no retries, before any worker
 * starts: a refused password or an unreachable Redis stops the start with one
 * line naming the setting (and never the password), instead of a worker
 * logging the refusal for ever. So does a cluster node given without
 * `REDIS_CLUSTER` (or `cluster`), and the reverse.
 */
export async function checkRedis(
  url: string,
  label: string,
  timeoutMs = 5_000,
  cluster = clusterFromEnv(),
): Promise<void> {
  const probe = new Redis(url, {
    lazyConnect: true,
    connectTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  let lastError: Error | undefined;
  probe.on('error', (err: Error) => {
    lastError = err;
  });
  // undefined: INFO refused (an ACL user without it); then nothing is checked.
  let clusterEnabled: boolean | undefined;
  try {
    await probe.connect();
    await probe.ping();
    clusterEnabled = await probe.info('cluster').then(
      (text) => /^cluster_enabled:1/m.test(text),
      () => undefined,
    );
  } catch (err) {
    const cause = lastError ?? (err as Error);
    const reason = /WRONGPASS|NOAUTH|invalid password|AUTH/i.test(cause.message)
      ? `Redis refused the credentials (${cause.message.split(' ')[0]})`
      : `cannot reach Redis at ${redactUrl(url)} (${redactText(cause.message)})`;
    throw new ConfigError(`${label}: ${reason}`);
  } finally {
    probe.disconnect();
  }
  // One line instead of a worker meeting MOVED (or a Cluster client finding
  // no slots) on every command for ever.
  if (clusterEnabled === true && !cluster)
    throw new ConfigError(
      `${label}: ${redactUrl(url)} is a Redis Cluster node; set REDIS_CLUSTER=1 (CLI: --cluster)`,
    );
  if (clusterEnabled === false && cluster)
    throw new ConfigError(
      `${label}: REDIS_CLUSTER is set but ${redactUrl(url)} is not a Redis Cluster node`,
    );
}

/**
 * Refuses a single-Redis connection to a Redis Cluster node before a worker
 * starts: BullMQ would meet CROSSSLOT or MOVED on every fetch, tens of
 * thousands of times a second. One round trip; a refused INFO passes.
 */
export async function checkConnectionKind(redis: RedisClient, label: string): Promise<void> {
  if (isCluster(redis)) return;
  const clusterNode = await redis.info('cluster').then(
    (text) => /^cluster_enabled:1/m.test(text),
    () => false,
  );
  if (clusterNode)
    throw new ConfigError(
      `${label}: a single connection to a Redis Cluster node; pass an ioredis Cluster (or a URL with REDIS_CLUSTER=1)`,
    );
}
