import { spawn, type ChildProcess } from 'node:child_process';
import type { EventEmitter } from 'node:events';
import { afterAll, afterEach } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { defaultRetryQueueName } from '../../workers/stream/index.js';
import { cleanQueue, connect, redisUrl, uniqueQueueName } from '../harness/redis.js';

/**
 * Shared by the stream consumer's integration tests: fresh streams and what a
 * test starts, cleaned up after it; waits on conditions, events and child exits.
 */

export const logger = createLogger({ level: 'silent' });
export const group = 'billing';
/** Short, exact delays: the fixed strategy waits `baseMs` every time. */
export const policy = { strategy: 'fixed', baseMs: 100, capMs: 100, maxAttempts: 5 } as const;

/** The file's connection (closed by {@link cleanUpStreams}). */
export const redis = connect();
const streams: string[] = [];
export const closers: (() => Promise<unknown>)[] = [];
const children: ChildProcess[] = [];

/** A fresh stream, deleted after the test with its counters and retry queue. */
export function newStream(): { stream: string; retryQueue: string } {
  const stream = uniqueQueueName('stream');
  streams.push(stream);
  return { stream, retryQueue: defaultRetryQueueName(stream, group) };
}

export function track<T extends { close(options: { timeoutMs?: number }): Promise<void> }>(
  closable: T,
): T {
  closers.push(() => closable.close({ timeoutMs: 2000 }));
  return closable;
}

/**
 * After each test of the calling file: kills its children, closes what it
 * tracked and deletes its streams with their counters and retry queues; after
 * them all, the connection.
 */
export function cleanUpStreams(): void {
  afterEach(async () => {
    for (const child of children.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
    for (const close of closers.splice(0).reverse()) await close();
    for (const stream of streams.splice(0)) {
      await redis.del(stream);
      // One hash of counters per stream: no KEYS, which a cluster answers per node.
      await redis.del(`${stream}:counts`);
      await cleanQueue(redis, defaultRetryQueueName(stream, group));
    }
  });

  afterAll(() => {
    redis.disconnect();
  });
}

/** Polls `check` until it holds; fails naming `what` after `timeoutMs`. */
export async function waitFor(
  what: string,
  check: () => Promise<boolean> | boolean,
  timeoutMs = 10_000,
) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** The next `event` from `emitter` whose payload passes `accept`. */
export function nextEvent<T>(
  emitter: EventEmitter,
  event: string,
  accept: (payload: T) => boolean = () => true,
  timeoutMs = 10_000,
): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      emitter.off(event, on);
      reject(new Error(`timed out waiting for ${event}`));
    }, timeoutMs);
    function on(payload: T): void {
      if (!accept(payload)) return;
      clearTimeout(timer);
      emitter.off(event, on);
      resolve(payload);
    }
    emitter.on(event, on);
  });
}

/** Entries delivered to the group and not acknowledged (XPENDING's summary count). */
export async function pendingCount(stream: string): Promise<number> {
  const [count] = (await redis.xpending(stream, group)) as [number, ...unknown[]];
  return count;
}

export async function counter(stream: string, n: number): Promise<number> {
  return Number((await redis.hget(`${stream}:counts`, String(n))) ?? 0);
}

export function spawnNode(args: string[], env: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', ...args], {
    env: { ...process.env, REDIS_URL: redisUrl(), ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  child.on('exit', (code, signal) => {
    if (code !== 0 && signal === null) console.error(`child ${args.join(' ')} failed:\n${stderr}`);
  });
  children.push(child);
  return child;
}

export function exited(child: ChildProcess, timeoutMs = 10_000): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('child did not exit')), timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve(code);
    });
  });
}
