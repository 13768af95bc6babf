import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { Redis } from 'ioredis';
import { ConfigError } from '../../src/config/env.js';
import type { Logger } from '../../src/config/logger.js';
import {
  embeddedPaths,
  readEmbeddedRecord,
  type EmbeddedRecord,
} from '../../src/redis/embedded-record.js';
import {
  adoptRedisServer,
  canConnect,
  freePort,
  hasRedisServer,
  isAlive,
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
  /**
   * Where it came from: the config, the local default, or the data
   * directory's embedded server (started, adopted, or another live
   * service's).
   */
  source: 'config' | 'local' | 'embedded';
  /** The embedded server when this process owns it (and so stops it). */
  server?: RedisServerHandle;
}

/** How long a start waits for a server another live service is starting. */
const waitForOwnerMs = 10_000;

/**
 * Whether the server on `record.port` is the recorded one: its pid and
 * directory match. Never mistakes another process for it.
 */
async function isRecordedServer(record: EmbeddedRecord): Promise<boolean> {
  if (!isAlive(record.pid) || !(await canConnect('127.0.0.1', record.port))) return false;
  const redis = new Redis(record.port, '127.0.0.1', {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    connectTimeout: 1_000,
    retryStrategy: () => null,
  });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    const info = await redis.info('server');
    const dir = (await redis.config('GET', 'dir')) as string[];
    return info.includes(`process_id:${record.pid}\r\n`) && dir[1] === record.dir;
  } catch {
    return false;
  } finally {
    redis.disconnect();
  }
}

/**
 * Takes `dataDir`'s lock (its pid in `redis.lock`), or names the live
 * service holding it. A lock whose service is gone (SIGKILLed) is taken over.
 */
async function takeLock(lock: string): Promise<{ owner: number } | 'taken'> {
  for (let attempt = 0; attempt < 5; attempt += 1) {
    try {
      await writeFile(lock, String(process.pid), { flag: 'wx', mode: 0o600 });
      return 'taken';
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const owner = Number((await readFile(lock, 'utf8').catch(() => '')).trim());
    if (owner !== process.pid && isAlive(owner)) return { owner };
    // Its service is gone: only one of several starts can create the lock again.
    await rm(lock, { force: true });
  }
  throw new ConfigError(`dataDir: cannot take ${lock}; remove it if no requeue service runs`);
}

/**
 * The data directory's embedded Redis, owned by one service at a time:
 * the recorded `redis-server` if it still runs (left behind by a killed
 * service: adopted, never doubled), else a new one on the recorded port
 * (so the CLI finds it at the same address) or a free one. A second live
 * service in the same directory uses the owner's server without owning it.
 */
async function embeddedRedis(dataDir: string, logger: Logger): Promise<RedisChoice> {
  const dir = resolve(dataDir);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const paths = embeddedPaths(dir);
  const lock = await takeLock(paths.lock);

  if (lock !== 'taken') {
    const deadline = performance.now() + waitForOwnerMs;
    while (performance.now() < deadline) {
      const record = readEmbeddedRecord(dir);
      if (record && (await isRecordedServer(record))) {
        logger.info(
          { port: record.port, dir, owner: lock.owner },
          "using the embedded redis-server of another requeue service's data directory",
        );
        return { url: `redis://127.0.0.1:${record.port}`, source: 'embedded' };
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new ConfigError(
      `dataDir: requeue service pid ${lock.owner} holds ${paths.lock} but its redis-server does not answer`,
    );
  }

  const release = (): Promise<void> =>
    Promise.all([rm(paths.record, { force: true }), rm(paths.lock, { force: true })]).then(
      () => undefined,
    );
  try {
    const record = readEmbeddedRecord(dir);
    let server: RedisServerHandle;
    if (record && record.dir === dir && (await isRecordedServer(record))) {
      server = adoptRedisServer(record);
      logger.warn(
        { pid: record.pid, port: record.port, dir },
        'adopted the embedded redis-server a previous requeue service left running',
      );
    } else {
      const port =
        record && !(await canConnect('127.0.0.1', record.port)) ? record.port : await freePort();
      if (!(await hasRedisServer())) throw new ConfigError(noRedisHelp);
      server = await startRedisServer({ dir, port, appendonly: true });
      await writeFile(
        paths.record,
        JSON.stringify({ pid: server.pid, port, dir } satisfies Partial<EmbeddedRecord>),
        { mode: 0o600 },
      );
      logger.info({ port, dir }, 'started an embedded redis-server');
    }
    // Stopping the server gives the directory up.
    const stop = server.stop;
    return {
      url: server.url,
      source: 'embedded',
      server: {
        ...server,
        get pid() {
          return server.pid;
        },
        stop: async () => {
          await stop();
          await release();
        },
      },
    };
  } catch (err) {
    await release();
    throw err;
  }
}

/**
 * The Redis the service uses: the configured URL; else the data
 * directory's embedded `redis-server` if one still runs; else
 * 127.0.0.1:6379 if it answers; else a `redis-server` from PATH started as a
 * child, with AOF on and its data under `dataDir`, stopped when the service
 * stops.
 */
export async function chooseRedis(
  redisUrl: string | undefined,
  dataDir: string,
  logger: Logger,
  { localUrl = 'redis://127.0.0.1:6379' }: { localUrl?: string } = {},
): Promise<RedisChoice> {
  if (redisUrl) return { url: redisUrl, source: 'config' };
  const record = readEmbeddedRecord(dataDir);
  if (!record || !isAlive(record.pid)) {
    const local = new URL(localUrl);
    if (await canConnect(local.hostname, Number(local.port || 6379))) {
      return { url: localUrl, source: 'local' };
    }
    if (!(await hasRedisServer())) throw new ConfigError(noRedisHelp);
  }
  return embeddedRedis(dataDir, logger);
}
