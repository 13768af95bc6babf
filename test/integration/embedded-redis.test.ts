import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { embeddedPaths, embeddedRedisUrl } from '../../src/redis/embedded-record.js';
import { freePort } from '../../src/redis/redis-server.js';
import { chooseRedis } from '../../workers/service/embedded-redis.js';
import { repoRoot, spawnTs } from '../harness/child.js';

const logger = createLogger({ level: 'silent' });
const dataDir = mkdtempSync(join(tmpdir(), 'requeue-data-'));

afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

/** The redis-server processes working in `dir` (Linux: their cwd is the AOF directory). */
function redisServersIn(dir: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        return (
          readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'redis-server' &&
          readlinkSync(`/proc/${pid}/cwd`) === dir
        );
      } catch {
        return false;
      }
    })
    .map(Number);
}

/** The first line a child prints, parsed. */
async function firstLine<T>(child: ReturnType<typeof spawnTs>): Promise<T> {
  const deadline = Date.now() + 30_000;
  while (!child.stdout().includes('\n')) {
    if (Date.now() > deadline) throw new Error(`no output; stderr: ${child.stderr()}`);
    if (child.proc.exitCode !== null) throw new Error(`exited: ${child.stderr()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return JSON.parse(child.stdout().split('\n')[0]!) as T;
}

describe.skipIf(process.platform !== 'linux')('the embedded Redis of a data directory', () => {
  it(
    "a SIGKILLed service's redis-server is adopted, not doubled, and the CLI finds it without REDIS_URL",
    {
      timeout: 90_000,
    },
    async () => {
      // Nothing answers here: the start goes on to the embedded server, as with an empty 6379.
      const localUrl = `redis://127.0.0.1:${await freePort()}`;
      const first = spawnTs('test/fixtures/embedded-redis-owner.ts', [dataDir, localUrl]);
      const started = await firstLine<{ url: string; pid: number }>(first);
      expect(redisServersIn(dataDir)).toEqual([started.pid]);
      await first.kill('SIGKILL');
      // The service is gone; its redis-server lives on, recorded in the data directory.
      expect(redisServersIn(dataDir)).toEqual([started.pid]);

      const again = await chooseRedis(undefined, dataDir, logger, { localUrl });
      try {
        expect(again.url).toBe(started.url);
        expect(again.server?.pid).toBe(started.pid);
        expect(redisServersIn(dataDir)).toEqual([started.pid]);

        // The CLI in the same directory, or given --data-dir, reaches it with no REDIS_URL.
        expect(embeddedRedisUrl(dataDir)).toBe(started.url);
        const env = { ...process.env };
        delete env.REDIS_URL;
        const cli = spawnSync(
          process.execPath,
          [
            '--import',
            'tsx',
            'src/cli/main.ts',
            'stats',
            'embedded-check',
            '--json',
            '--data-dir',
            dataDir,
          ],
          { cwd: repoRoot, env, encoding: 'utf8', timeout: 30_000 },
        );
        // The queue is unknown to this fresh Redis: refused, which the CLI can say only once it got there.
        expect(cli.status, cli.stderr).toBe(2);
        expect(cli.stderr).toMatch(/^requeue: <queue>: no queue "embedded-check" on this Redis/);
      } finally {
        await again.server?.stop();
      }
      expect(redisServersIn(dataDir)).toEqual([]);
      expect(existsSync(embeddedPaths(dataDir).lock)).toBe(false);
      expect(embeddedRedisUrl(dataDir)).toBeUndefined();
    },
  );

  it(
    "a second live service in the same directory uses the owner's server and leaves it to the owner",
    {
      timeout: 60_000,
    },
    async () => {
      const localUrl = `redis://127.0.0.1:${await freePort()}`;
      const owner = spawnTs('test/fixtures/embedded-redis-owner.ts', [dataDir, localUrl]);
      const started = await firstLine<{ url: string; pid: number }>(owner);
      const second = await chooseRedis(undefined, dataDir, logger, { localUrl });
      expect(second).toEqual({ url: started.url, source: 'embedded' });
      expect(redisServersIn(dataDir)).toEqual([started.pid]);
      await owner.kill('SIGKILL');
      const adopted = await chooseRedis(undefined, dataDir, logger, { localUrl });
      expect(adopted.server?.pid).toBe(started.pid);
      await adopted.server?.stop();
      expect(redisServersIn(dataDir)).toEqual([]);
    },
  );
});
