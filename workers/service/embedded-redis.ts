import { resolve } from 'node:path';
import { mkdir } from 'node:fs/promises';
import { ConfigError } from '../../src/config/env.js';
import type { Logger } from '../../src/config/logger.js';
import {
  canConnect,
  hasRedisServer,
  startRedisServer,
  type RedisServerHandle,
} from '../../src/redis/redis-server.js';

/** The paragraph shown when there is no Redis to use. */
export const noRedisHelp =
  'requeue needs Redis 7, and found none: REDIS_URL is unset, nothing answers on 127.0.0.1:6379, ' +
  'and there is no redis-server on PATH to start one. Install one with your package manager ' +
  '(apt-get install redis-server, dnf install redis, brew install redis) and run this again — requeue ' +
  'will start it for you with its data under ./.requeue — or run `docker compose up` to get Redis and ' +
  'requeue together, or point REDIS_URL at a Redis you have.';

export interface RedisChoice {
  url: string;
  /** Where it came from: the config, the local default, or one requeue started. */
  source: 'config' | 'local' | 'embedded';
  server?: RedisServerHandle;
}

/**
 * The Redis the service uses: the configured URL; else 127.0.0.1:6379 if it
 * answers; else a `redis-server` from PATH started as a child, with AOF on
 * and its data under `dataDir`, stopped when the service stops.
 */
export async function chooseRedis(
  redisUrl: string | undefined,
  dataDir: string,
  logger: Logger,
  { localUrl = 'redis://127.0.0.1:6379' }: { localUrl?: string } = {},
): Promise<RedisChoice> {
  if (redisUrl) return { url: redisUrl, source: 'config' };
  const local = new URL(localUrl);
  if (await canConnect(local.hostname, Number(local.port || 6379))) {
    return { url: localUrl, source: 'local' };
  }
  if (!(await hasRedisServer())) throw new ConfigError(noRedisHelp);
  const dir = resolve(dataDir);
  await mkdir(dir, { recursive: true });
  const server = await startRedisServer({ dir, appendonly: true });
  logger.info({ port: server.port, dir }, 'started an embedded redis-server');
  return { url: server.url, source: 'embedded', server };
}
