import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { RedisClient } from '../../src/redis/connection.js';
import { onCleanup } from './cleanup.js';

/**
 * Runs `action` under MONITOR and returns every command that mentions
 * `name` (directly or from inside a script) and that Redis flags as a write:
 * the check behind "looking never writes".
 */
export async function writesDuring(
  client: RedisClient,
  name: string,
  action: () => Promise<unknown>,
): Promise<string[][]> {
  // MONITOR is a single server's: the tests run it on a plain connection.
  const redis = client as Redis;
  const monitor = await redis.monitor();
  onCleanup(() => monitor.disconnect());
  const seen: string[][] = [];
  const marker = `end-of-${randomUUID()}`;
  const ended = new Promise<void>((resolve) => {
    monitor.on('monitor', (_time: string, args: string[]) => {
      if (args[0]?.toLowerCase() === 'ping' && args[1] === marker) resolve();
      else if (args.some((a) => a.includes(name))) seen.push(args);
    });
  });
  await action();
  await redis.ping(marker);
  await ended;
  monitor.disconnect();
  const names = [...new Set(seen.map((args) => args[0]!.toLowerCase()))];
  if (names.length === 0) return [];
  const info = (await redis.command('INFO', ...names)) as [string, number, string[]][];
  const writing = new Set(info.filter((c) => c[2].includes('write')).map((c) => c[0]));
  return seen.filter((args) => writing.has(args[0]!.toLowerCase()));
}
