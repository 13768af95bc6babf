import { expect } from 'vitest';
import type { QueueCounts } from '../../src/scheduler/queue.js';
import { runTs, spawnTs, type CommandResult, type TsChild } from '../harness/child.js';
import { redisUrl } from '../harness/redis.js';
import { onCleanup } from '../harness/cleanup.js';

/**
 * The requeue CLI as a process under tsx against the run's Redis: one command,
 * its JSON, a worker, polled stats and the usage-error check.
 */

/** Every CLI call is a Node process started under tsx: a second or two each. */
export const CLI_TEST_TIMEOUT_MS = 90_000;
export const handlerModule = 'examples/flaky-handler.mjs';

/** Runs `requeue ...args` to its end against the test Redis. */
export function requeue(...args: string[]): Promise<CommandResult> {
  return runTs('src/cli/main.ts', args, { REDIS_URL: redisUrl() });
}

/** Runs `requeue ...args --json`, expects success and parses stdout. */
export async function requeueJson<T>(...args: string[]): Promise<T> {
  const result = await requeue(...args, '--json');
  expect(result, `requeue ${args.join(' ')}: ${result.stderr}`).toMatchObject({ code: 0 });
  return JSON.parse(result.stdout) as T;
}

/** Starts `requeue worker` as a child process; killed after the test if still alive. */
export function startCliWorker(queue: string, ...flags: string[]): TsChild {
  const child = spawnTs('src/cli/main.ts', ['worker', queue, ...flags], {
    REDIS_URL: redisUrl(),
  });
  onCleanup(async () => {
    await child.kill('SIGKILL');
  });
  return child;
}

/**
 * Polls `requeue stats --json` until `done` holds. Bounded: it waits on
 * another process, whose progress this process cannot observe otherwise.
 */
export async function statsUntil(
  queue: string,
  done: (counts: QueueCounts) => boolean,
  timeoutMs = 30_000,
): Promise<QueueCounts> {
  const deadline = Date.now() + timeoutMs;
  let counts = await requeueJson<QueueCounts>('stats', queue);
  while (!done(counts)) {
    if (Date.now() > deadline) {
      throw new Error(`stats did not reach the expected counts: ${JSON.stringify(counts)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
    counts = await requeueJson<QueueCounts>('stats', queue);
  }
  return counts;
}

/** Expects a usage error: exit code 2, one line on stderr, no stack trace, nothing on stdout. */
export function expectUsageError(result: CommandResult, pattern: RegExp): void {
  expect(result.code, result.stderr).toBe(2);
  expect(result.stdout).toBe('');
  expect(result.stderr.endsWith('\n')).toBe(true);
  const lines = result.stderr.trimEnd().split('\n');
  expect(lines, result.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(pattern);
  expect(result.stderr).not.toMatch(/^\s+at /m);
}
