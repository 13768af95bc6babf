import { runTs, type CommandResult } from '../harness/child.js';
import { redisUrl } from '../harness/redis.js';
import { redis } from '../harness/file-redis.js';
import { writesDuring as monitoredWrites } from '../harness/monitor.js';

/**
 * Shared by the "looking never writes" tests (on the file's connection,
 * test/harness/file-redis.ts): the CLI as a process, window options, a key's
 * snapshot and the writes a MONITOR sees during an action.
 */

/** Every CLI call is a Node process started under tsx: a second or two each. */
export const CLI_TIMEOUT_MS = 60_000;

/** The workers' options, and a status caller's very different ones. */
// Windows run on Redis's clock: the workers' window outlives a CLI start on a loaded machine
// (a 10 s window once aged out while the CLI started).
export const workerBreaker = {
  windowMs: 100_000,
  buckets: 10,
  minimumRequests: 10,
  failureRate: 0.5,
};
export const otherBreakers = [
  { windowMs: 100, buckets: 10 },
  { windowMs: 600_000, buckets: 2 },
];

export function requeue(...args: string[]): Promise<CommandResult> {
  return runTs('src/cli/main.ts', [...args, '--redis', redisUrl()], {}, CLI_TIMEOUT_MS);
}

/** A key's bytes and its TTL, to compare before and after a read. */
export async function snapshot(
  key: string,
): Promise<{ fields: Record<string, string>; pttl: number }> {
  const [fields, pttl] = await Promise.all([redis.hgetall(key), redis.pttl(key)]);
  return { fields, pttl };
}

/**
 * A TTL no writer ever sets: a write that refreshed it (every window writer
 * does) would show.
 */
export const markerTtlMs = 86_400_000;

/** {@link monitoredWrites} on this file's connection. */
export const writesDuring = (name: string, action: () => Promise<unknown>) =>
  monitoredWrites(redis, name, action);
