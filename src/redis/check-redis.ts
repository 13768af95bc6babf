import { Redis } from 'ioredis';
import { readEnv } from '../config/env.js';
import { ConfigError } from '../errors/config-error.js';
import { withDeadline } from '../util/lifecycle.js';
import { redactText, redactUrl } from '../util/redact.js';
import { clusterFromEnv, isCluster, type RedisClient } from './connection.js';

/** How long a start or a one-shot command waits for Redis's first reply, unless told. */
export const defaultConnectTimeoutMs = 5_000;

/** `REDIS_CONNECT_TIMEOUT_MS` (validated, naming the variable), else {@link defaultConnectTimeoutMs}. */
export function connectTimeoutFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  return readEnv(env).REDIS_CONNECT_TIMEOUT_MS ?? defaultConnectTimeoutMs;
}

/** Where a connection goes and what to call it when it does not answer. */
export interface FirstReplyTarget {
  /** The URL dialled; shown with its password blanked. */
  url: string;
  /** The setting that named it (`--redis`, `env.REDIS_URL`, …). */
  label: string;
  /** @defaultValue {@link connectTimeoutFromEnv} */
  timeoutMs?: number;
}

/**
 * The one gate between a process and Redis: waits for `ask`'s reply on
 * `redis` (a PING by default) for at most `timeoutMs`, from connecting to the
 * answer, and turns every way of not getting it into a {@link ConfigError}
 * of one line naming the setting and the address (never its password). A
 * server that accepts connections and never answers is one of them: ioredis's
 * `connectTimeout` ends when the socket opens, and its ready check then
 * waits for ever. Every one-shot command and every process start comes
 * through here; what runs after it reconnects as before.
 */
export async function firstReply<T = unknown>(
  redis: RedisClient,
  target: FirstReplyTarget,
  ask: (redis: RedisClient) => Promise<T> = (r) => r.ping() as Promise<T>,
): Promise<T> {
  const timeoutMs = target.timeoutMs ?? connectTimeoutFromEnv();
  let lastError: Error | undefined;
  const onError = (err: Error): void => {
    lastError = err;
  };
  redis.on('error', onError);
  try {
    const outcome = await withDeadline(ask(redis), timeoutMs);
    if (outcome.kind === 'timeout') {
      abandon(redis);
      throw new ConfigError(
        `${target.label}: no reply from Redis at ${redactUrl(target.url)} within ${timeoutMs} ms` +
          (lastError ? ` (${redactText(lastError.message)})` : '') +
          ' (to wait longer: REDIS_CONNECT_TIMEOUT_MS; CLI: --connect-timeout-ms)',
      );
    }
    return outcome.value;
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    abandon(redis);
    const cause = lastError ?? (err as Error);
    throw new ConfigError(
      /WRONGPASS|NOAUTH|invalid password|AUTH/i.test(cause.message)
        ? `${target.label}: Redis refused the credentials (${cause.message.split(' ')[0]})`
        : `${target.label}: cannot reach Redis at ${redactUrl(target.url)} (${redactText(cause.message)})`,
    );
  } finally {
    redis.off('error', onError);
  }
}

/**
 * Closes a connection that never answered, at once: a polite close sends
 * QUIT or half-closes the socket, which a mute server never finishes, and
 * the open socket would hold the process for seconds.
 */
function abandon(redis: RedisClient): void {
  redis.disconnect();
  for (const node of isCluster(redis) ? redis.nodes() : [redis]) node.stream?.destroy();
}

/**
 * Connects once, with no retries and {@link firstReply}'s deadline, before any
 * worker starts: a refused password, an unreachable or a mute Redis stops
 * the start with one line naming the setting (and never the password),
 * instead of a worker logging the refusal for ever. So does a cluster node
 * given without `REDIS_CLUSTER` (or `cluster`), and the reverse.
 */
export async function checkRedis(
  url: string,
  label: string,
  timeoutMs: number = connectTimeoutFromEnv(),
  cluster = clusterFromEnv(),
): Promise<void> {
  const probe = new Redis(url, {
    connectTimeout: timeoutMs,
    // ioredis waits this long (2 s by default) for a closed socket to finish closing.
    disconnectTimeout: 100,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  // firstReply reports the failure once; ioredis would also print each error event.
  probe.on('error', () => undefined);
  // undefined: INFO refused (an ACL user without it); then nothing is checked.
  let clusterEnabled: boolean | undefined;
  try {
    clusterEnabled = await firstReply(probe, { url, label, timeoutMs }, async (redis) => {
      await redis.ping();
      return redis.info('cluster').then(
        (text) => /^cluster_enabled:1/m.test(text),
        () => undefined,
      );
    });
  } finally {
    abandon(probe);
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
