/**
 * The embedded Redis of a data directory. The service that owns the
 * directory holds `redis.lock` (its pid) and records the `redis-server` it
 * runs in `redis.json`, so a later start adopts a server left behind by a
 * killed service instead of starting a second one on the same AOF, and the
 * CLI run in the same directory finds it without `REDIS_URL`.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { isAlive } from './redis-server.js';

/** The data directory when none is given (relative to the working directory). */
export const defaultDataDir = '.requeue';

/** What `redis.json` says about the data directory's `redis-server`. */
export interface EmbeddedRecord {
  /** The `redis-server`'s pid. */
  pid: number;
  /** Its TCP port on 127.0.0.1. */
  port: number;
  /** Its working directory (the AOF), absolute. */
  dir: string;
}

/** The files a data directory holds besides Redis's own. */
export function embeddedPaths(dataDir: string): { record: string; lock: string } {
  const dir = resolve(dataDir);
  return { record: join(dir, 'redis.json'), lock: join(dir, 'redis.lock') };
}

/** The record of `dataDir`, or `undefined` when there is none or it is unreadable. */
export function readEmbeddedRecord(dataDir: string): EmbeddedRecord | undefined {
  try {
    const parsed = JSON.parse(readFileSync(embeddedPaths(dataDir).record, 'utf8')) as unknown;
    const { pid, port, dir } = (parsed ?? {}) as Partial<EmbeddedRecord>;
    if (typeof pid !== 'number' || typeof port !== 'number' || typeof dir !== 'string') {
      return undefined;
    }
    if (!Number.isSafeInteger(port) || port < 1 || port > 65_535) return undefined;
    return { pid, port, dir };
  } catch {
    return undefined;
  }
}

/**
 * The URL of `dataDir`'s embedded Redis while its `redis-server` runs,
 * else `undefined`. Synchronous, for the CLI's flag defaults.
 */
export function embeddedRedisUrl(dataDir: string = defaultDataDir): string | undefined {
  const record = readEmbeddedRecord(dataDir);
  return record && isAlive(record.pid) ? `redis://127.0.0.1:${record.port}` : undefined;
}
