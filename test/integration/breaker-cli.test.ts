import { spawn, type ChildProcess } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { parseBreakerOptions } from '../../src/policy/breaker/breaker-options.js';
import { parseBudgetOptions } from '../../src/policy/budget/budget-options.js';
import { BreakerStore } from '../../src/redis/breaker-store.js';
import { BudgetStore } from '../../src/redis/budget-store.js';
import { queueBreakerKey } from '../../src/scheduler/requeue-worker.js';
import type { Dependency } from '../fixtures/breaker-dependency.js';
import { bullPrefixOf, cleanedQueueName, redisUrl } from '../harness/redis.js';
import { onCleanup } from '../harness/cleanup.js';
import { repoRoot } from '../harness/child.js';
import { connectForFile, redis } from '../harness/file-redis.js';
import {
  queueFor,
  dependency,
  until,
  delay,
  readState,
  jobs,
  breakerJson,
} from './breaker-helpers.js';

/**
 * `requeue breaker`: status, open and close from the CLI, as a process against
 * the run's Redis.
 */

connectForFile();

describe('requeue breaker (CLI)', () => {
  interface Run {
    code: number | null;
    stdout: string;
    stderr: string;
  }

  function cli(...args: string[]): Promise<Run> {
    return new Promise((resolve, reject) => {
      const child = spawn(
        process.execPath,
        ['--import', 'tsx', 'src/cli/main.ts', ...args, '--redis', redisUrl()],
        { cwd: repoRoot, env: { ...process.env, LOG_LEVEL: 'silent' } },
      );
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });
  }

  interface StatusJson {
    queue: string;
    breakers: {
      key: string;
      state: string;
      isolated: boolean;
      failureRate: number;
      failures: number;
      total: number;
      consecutiveFailures: number;
      openedAt: number | null;
      halfOpenAt: number | null;
      probesInFlight: number;
      trips: number;
      windowMs: number | null;
      buckets: number | null;
    }[];
    budget: { kind: string; tokens?: number; capacity?: number; denied?: number };
  }

  async function status(name: string, ...extra: string[]): Promise<StatusJson> {
    const run = await cli('breaker', 'status', name, '--json', ...extra);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    return JSON.parse(run.stdout) as StatusJson;
  }

  it(
    'status shows state, failure rate, volume, openedAt, halfOpenAt, probes and budget tokens',
    {
      timeout: 60_000,
    },
    async () => {
      const name = cleanedQueueName(redis, 'brk-cli');
      // A window that outlives the slowest run of this test's CLI calls (a few s each).
      const breakerFlag = breakerJson({ openMs: 30_000, minimumRequests: 10, windowMs: 600_000 });
      const store = new BreakerStore(redis, name, parseBreakerOptions(JSON.parse(breakerFlag)));
      const budget = new BudgetStore(redis, name, parseBudgetOptions({}));

      // A queue with no key at all is not "closed": it is unknown (exit 2, the known ones named).
      const unknown = await cli('breaker', 'status', name);
      expect(unknown.code).toBe(2);
      expect(unknown.stderr).toMatch(`no queue "${name}" on this Redis`);
      // Known (one BullMQ key) but with no breaker state yet: closed, as before.
      await redis.hset(`${bullPrefixOf(redis, name)}:${name}:meta`, 'version', 'brk-cli');
      const fresh = await status(name);
      expect(fresh.breakers).toEqual([
        expect.objectContaining({
          key: queueBreakerKey,
          state: 'closed',
          failureRate: 0,
          total: 0,
          openedAt: null,
          halfOpenAt: null,
          probesInFlight: 0,
        }),
      ]);
      expect(fresh.budget).toEqual({ kind: 'token-bucket', tokens: 500, capacity: 500, denied: 0 });

      const now = Date.now();
      await store.record(queueBreakerKey, { successes: 2, failures: 8, trailingFailures: 8 }, now);
      for (let i = 0; i < 3; i += 1) await budget.take(5, now);
      const open = await status(name, '--breaker', breakerFlag);
      expect(open.breakers).toEqual([
        {
          key: queueBreakerKey,
          state: 'open',
          isolated: false,
          failureRate: 0.8,
          failures: 8,
          total: 10,
          consecutiveFailures: 8,
          openedAt: now,
          halfOpenAt: now + 30_000,
          probesInFlight: 0,
          trips: 1,
          // The live window's own geometry, whatever the caller's options.
          windowMs: 600_000,
          buckets: 10,
        },
      ]);
      expect(open.budget).toMatchObject({ tokens: 485, capacity: 500 });

      const admitted = await store.admit(queueBreakerKey, 'probe-1', now + 30_000);
      expect(admitted.admission.kind).toBe('probe');
      const half = await status(name, '--breaker', breakerFlag);
      expect(half.breakers[0]).toMatchObject({ state: 'half-open', probesInFlight: 1 });

      const table = await cli('breaker', 'status', name, '--breaker', breakerFlag);
      expect(table.code).toBe(0);
      expect(table.stdout).toMatch(/half-open/);
      expect(table.stdout).toMatch(/8\/10/);
      expect(table.stdout).toContain('budget: 485/500 tokens');

      const closed = await cli('breaker', 'close', name);
      expect(closed.code).toBe(0);
      expect(closed.stdout).toBe(`closed ${name}/${queueBreakerKey}\n`);
      expect((await status(name)).breakers[0]).toMatchObject({
        state: 'closed',
        total: 0,
        trips: 0,
      });

      const opened = await cli('breaker', 'open', name, '--key', 'endpoint-7');
      expect(opened.code).toBe(0);
      const isolated = await status(name, '--key', 'endpoint-7');
      expect(isolated.breakers).toEqual([
        expect.objectContaining({
          key: 'endpoint-7',
          state: 'open',
          isolated: true,
          halfOpenAt: null,
        }),
      ]);
    },
  );

  it(
    'open isolates a running worker (it stops taking jobs); close resumes it',
    {
      timeout: 60_000,
    },
    async () => {
      const name = cleanedQueueName(redis, 'brk-cli-iso');
      const dep = await dependency();
      const worker = spawnCliWorker(
        name,
        dep,
        breakerJson({ halfOpenRetryMs: 300, isolatedRetryMs: 300 }),
      );
      await worker.waitFor('worker started');
      const queue = queueFor(name);
      await queue.addBulk(jobs(3));
      await until(() => dep.count() === 3, 'the worker to run the first 3 jobs');

      const opened = await cli('breaker', 'open', name);
      expect(opened.code).toBe(0);
      expect(opened.stdout).toBe(`opened ${name}/${queueBreakerKey} (isolated)\n`);
      await worker.waitFor('breaker opened');

      const held = await queue.addBulk(jobs(10, (i) => ({ i: 100 + i })));
      // Nothing to wait on for "nothing happens": watch for several halfOpenRetryMs.
      await delay(2_000);
      expect(dep.count()).toBe(3);
      const deferrals = (await Promise.all(held.map((j) => readState(name, j.id)))).reduce(
        (sum, s) => sum + (s?.deferrals ?? 0),
        0,
      );
      // One job may be taken by the fetch that was already waiting when the breaker
      // opened; after that an isolated worker must take none.
      expect
        .soft(deferrals, 'jobs an isolated worker took (and deferred) while it should be idle')
        .toBeLessThanOrEqual(1);

      const closed = await cli('breaker', 'close', name);
      expect(closed.code).toBe(0);
      await worker.waitFor('breaker closed');
      await until(() => dep.count() === 13, 'the 10 held jobs to run after close');
      await until(
        async () => (await queue.counts()).completed === 13,
        'all 13 jobs to complete',
        10_000,
        100,
      );
    },
  );

  /** `requeue worker` in a child process, its pino lines read for their `msg`. */
  function spawnCliWorker(name: string, dep: Dependency, breaker: string) {
    const child: ChildProcess = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        'src/cli/main.ts',
        'worker',
        name,
        '--handler',
        'test/fixtures/breaker-handler.ts',
        '--breaker',
        breaker,
        '--concurrency',
        '2',
        '--redis',
        redisUrl(),
      ],
      {
        cwd: repoRoot,
        env: { ...process.env, LOG_LEVEL: 'info', DEPENDENCY_URL: dep.url },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const messages: string[] = [];
    let stderr = '';
    let buffer = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      buffer += chunk.toString();
      const lines = buffer.split('\n');
      buffer = lines.pop() ?? '';
      for (const line of lines) {
        try {
          messages.push(String((JSON.parse(line) as { msg?: unknown }).msg));
        } catch {
          // Not a log line.
        }
      }
    });
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    onCleanup(async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(timer);
      }
    });
    return {
      messages,
      waitFor: (msg: string) =>
        until(
          () => messages.includes(msg),
          () => `the worker to log "${msg}" (logged: ${messages.join(' | ')}; stderr: ${stderr})`,
          20_000,
        ),
    };
  }
});
