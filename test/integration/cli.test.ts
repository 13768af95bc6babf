import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { freePort } from '../../src/redis/redis-server.js';
import { DeadLetterQueue } from '../../src/scheduler/dlq/dead-letter-queue.js';
import { createQueue, type QueueCounts } from '../../src/scheduler/queue.js';
import { createWorker, queueBreakerKey, type Handler } from '../../src/scheduler/requeue-worker.js';
import { parseBreakerOptions } from '../../src/policy/breaker/breaker-options.js';
import { BreakerStore } from '../../src/redis/breaker-store.js';
import type { QueueSummary } from '../../src/cli/commands/queues.js';
import { seedDead } from '../harness/dlq.js';
import { loadHandlerModule } from '../../src/util/load-module.js';
import { runTs, spawnTs, type CommandResult, type TsChild } from '../harness/child.js';
import { cleanedQueueName, connect, redisUrl } from '../harness/redis.js';
import { onCleanup } from '../harness/cleanup.js';
import { WorkerEventLog } from '../harness/worker-events.js';

/** Every CLI call is a Node process started under tsx: a second or two each. */
const CLI_TEST_TIMEOUT_MS = 90_000;
const handlerModule = 'examples/flaky-handler.mjs';

const admin = connect();

afterAll(() => {
  admin.disconnect();
});

/** Runs `requeue ...args` to its end against the test Redis. */
function requeue(...args: string[]): Promise<CommandResult> {
  return runTs('src/cli/main.ts', args, { REDIS_URL: redisUrl() });
}

/** Runs `requeue ...args --json`, expects success and parses stdout. */
async function requeueJson<T>(...args: string[]): Promise<T> {
  const result = await requeue(...args, '--json');
  expect(result, `requeue ${args.join(' ')}: ${result.stderr}`).toMatchObject({ code: 0 });
  return JSON.parse(result.stdout) as T;
}

/** Starts `requeue worker` as a child process; killed after the test if still alive. */
function startCliWorker(queue: string, ...flags: string[]): TsChild {
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
async function statsUntil(
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
function expectUsageError(result: CommandResult, pattern: RegExp): void {
  expect(result.code, result.stderr).toBe(2);
  expect(result.stdout).toBe('');
  expect(result.stderr.endsWith('\n')).toBe(true);
  const lines = result.stderr.trimEnd().split('\n');
  expect(lines, result.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(pattern);
  expect(result.stderr).not.toMatch(/^\s+at /m);
}

describe('the requeue CLI', () => {
  it(
    'enqueues, runs a worker that retries and dead-letters, and reports it in stats and dlq list',
    async () => {
      const queue = cleanedQueueName(admin, 'cli-flow');
      const enqueued = await Promise.all(
        [
          { name: 'transient', data: { fail: 'transient', times: 2 } },
          { name: 'permanent', data: { fail: 'permanent' } },
          { name: 'always', data: { fail: 'always' } },
        ].map(({ name, data }) =>
          requeueJson<{ queue: string; id: string; name: string }>(
            'enqueue',
            queue,
            '--name',
            name,
            '--data',
            JSON.stringify(data),
          ),
        ),
      );
      expect(enqueued.map((job) => [job.queue, job.name])).toEqual([
        [queue, 'transient'],
        [queue, 'permanent'],
        [queue, 'always'],
      ]);
      const idOf = (name: string) => enqueued.find((job) => job.name === name)!.id;

      const worker = startCliWorker(
        queue,
        '--handler',
        handlerModule,
        '--policy',
        JSON.stringify({ strategy: 'fixed', baseMs: 50, capMs: 50, maxAttempts: 3 }),
      );
      // A dead job is in the DLQ a moment before it leaves the active list: wait for both.
      const counts = await statsUntil(
        queue,
        (c) => c.completed + c.dead >= 3 && c.waiting + c.active + c.delayed === 0,
      );
      expect(counts).toEqual({
        waiting: 0,
        active: 0,
        delayed: 0,
        completed: 1,
        failed: 0,
        dead: 2,
      });

      const listed = await requeueJson<Record<string, unknown>[]>('dlq', 'list', queue);
      expect(listed).toHaveLength(2);
      for (const entry of listed) {
        for (const field of ['id', 'name', 'data', 'reason', 'attempts', 'history', 'deadAt']) {
          expect(entry, field).toHaveProperty(field);
        }
      }
      const byName = new Map(listed.map((entry) => [entry.name, entry]));
      expect(byName.get('permanent')).toMatchObject({
        id: idOf('permanent'),
        data: { fail: 'permanent' },
        reason: 'permanent-error',
        attempts: 1,
      });
      expect(byName.get('always')).toMatchObject({
        id: idOf('always'),
        data: { fail: 'always' },
        reason: 'max-attempts',
        attempts: 3,
      });
      expect((byName.get('always')!.history as unknown[]).length).toBe(3);

      expect(await worker.kill('SIGTERM')).toEqual({ code: 0, signal: null });
    },
    CLI_TEST_TIMEOUT_MS,
  );

  it(
    'shows, replays by reason and purges dead jobs',
    async () => {
      const queue = cleanedQueueName(admin, 'cli-dlq');
      // The dead jobs are made in this process: the CLI is what is under test here.
      const producer = createQueue(queue, { connection: redisUrl() });
      const { handler } = await loadHandlerModule<Handler<unknown, unknown>>(
        handlerModule,
        'handler',
      );
      const worker = createWorker(queue, handler, {
        connection: redisUrl(),
        logger: createLogger({ level: 'silent' }),
        policy: { strategy: 'fixed', baseMs: 10, capMs: 10, maxAttempts: 2 },
      });
      const events = new WorkerEventLog(worker);
      const stopWorker = worker.close.bind(worker);
      let stopped: Promise<void> | undefined;
      onCleanup(async () => {
        await (stopped ??= stopWorker());
        await producer.close();
      });
      const permanent = await producer.add('permanent', { fail: 'permanent' });
      const always = await producer.add('always', { fail: 'always' });
      await events.waitFor('job:dead-lettered', (e) => e.jobId === permanent.id);
      await events.waitFor('job:dead-lettered', (e) => e.jobId === always.id);
      // No worker from here on: a replayed job stays waiting.
      await (stopped ??= stopWorker());

      const shown = await requeueJson<Record<string, unknown>>('dlq', 'show', queue, always.id);
      expect(shown).toMatchObject({
        source: queue,
        id: always.id,
        name: 'always',
        reason: 'max-attempts',
        attempts: 2,
      });
      expect(shown.history).toHaveLength(2);
      expectUsageError(await requeue('dlq', 'show', queue, 'nope'), /no dead job "nope"/);

      expect(await requeueJson('dlq', 'replay', queue, '--reason', 'permanent-error')).toEqual({
        done: 1,
        total: 1,
        renamed: [],
      });
      const dlq = new DeadLetterQueue(queue, { connection: redisUrl() });
      onCleanup(() => dlq.close());
      expect((await dlq.list()).map((r) => r.id)).toEqual([always.id]);
      // Back in the source queue, waiting for a worker, under its own id (which was free).
      expect(await producer.counts()).toMatchObject({ waiting: 1, dead: 1 });
      expect(await producer.bull.getJob(permanent.id)).toBeDefined();

      expect(await requeueJson('dlq', 'purge', queue, '--all')).toEqual({ done: 1, total: 1 });
      expect(await requeueJson<QueueCounts>('stats', queue)).toMatchObject({
        waiting: 1,
        dead: 0,
      });
    },
    CLI_TEST_TIMEOUT_MS,
  );

  it(
    'exits with code 2 and one line on a usage error',
    async () => {
      const queue = cleanedQueueName(admin, 'cli-usage');
      const [bogus, noFilter, badReason] = await Promise.all([
        requeue('stats', queue, '--bogus'),
        requeue('dlq', 'replay', queue),
        requeue('dlq', 'list', queue, '--reason', 'nope'),
      ]);
      expectUsageError(bogus, /--bogus/);
      expectUsageError(noFilter, /--id.*--reason.*--all/);
      expectUsageError(badReason, /--reason.*"nope"/);
    },
    CLI_TEST_TIMEOUT_MS,
  );

  it(
    'prints one line for a mistyped flag that has a suggestion',
    async () => {
      const queue = cleanedQueueName(admin, 'cli-typo');
      expectUsageError(await requeue('stats', queue, '--jsn'), /--jsn.*--json/);
    },
    CLI_TEST_TIMEOUT_MS,
  );

  it(
    'queues lists every queue with its waiting (prioritized included), active, delayed and dead jobs, workers and breaker',
    async () => {
      const a = cleanedQueueName(admin, 'cli-queues-a');
      const b = cleanedQueueName(admin, 'cli-queues-b');
      const producerA = createQueue(a, { connection: redisUrl() });
      const producerB = createQueue(b, { connection: redisUrl() });
      onCleanup(() => producerA.close());
      onCleanup(() => producerB.close());
      await producerA.add('job', { n: 1 });
      await producerA.add('job', { n: 2 });
      // A keyed job waits in BullMQ's 'prioritized' set: counted as waiting.
      await producerA.add('job', { n: 3 }, { dispatchKey: 'k1' });
      expect(await producerA.bull.getJobCounts('prioritized')).toEqual({ prioritized: 1 });
      await producerA.add('job', { n: 4 }, { delayMs: 3_600_000 });
      // B: nothing due, so its worker takes nothing; one dead job; its breaker opened by hand.
      await producerB.add('job', { n: 1 }, { delayMs: 3_600_000 });
      await seedDead(admin, {
        source: b,
        id: 'd1',
        name: 'job',
        data: {},
        opts: {},
        reason: 'permanent-error',
        message: 'x',
        attempts: 1,
        history: [],
        deadAt: Date.now(),
        replays: 0,
      });
      await new BreakerStore(admin, b, parseBreakerOptions({})).forceOpen(
        queueBreakerKey,
        Date.now(),
      );
      const worker = createWorker(b, async () => undefined, {
        connection: redisUrl(),
        logger: createLogger({ level: 'silent' }),
      });
      onCleanup(() => worker.close());
      await worker.waitUntilReady();

      const listed = await requeueJson<QueueSummary[]>('queues');
      expect(listed.filter((q) => q.queue === a || q.queue === b)).toEqual([
        {
          queue: a,
          waiting: 3,
          active: 0,
          delayed: 1,
          dead: 0,
          workers: 0,
          breaker: 'closed',
          isolated: false,
        },
        {
          queue: b,
          waiting: 0,
          active: 0,
          delayed: 1,
          dead: 1,
          workers: 1,
          breaker: 'open',
          isolated: true,
        },
      ]);
      // Sorted by name, each once.
      const names = listed.map((q) => q.queue);
      expect(names).toEqual([...new Set(names)].sort());

      const table = await requeue('queues');
      expect(table.code, table.stderr).toBe(0);
      const lines = table.stdout.trimEnd().split('\n');
      expect(lines[0]!.split(/\s+/)).toEqual([
        'QUEUE',
        'WAITING',
        'ACTIVE',
        'DELAYED',
        'DEAD',
        'WORKERS',
        'BREAKER',
      ]);
      const row = (name: string) => lines.find((l) => l.startsWith(`${name} `))?.split(/\s+/);
      expect(row(a)).toEqual([a, '3', '0', '1', '0', '0', 'closed']);
      expect(row(b)).toEqual([b, '0', '0', '1', '1', '1', 'open', '(isolated)']);
    },
    CLI_TEST_TIMEOUT_MS,
  );

  it(
    'an unknown queue is exit 2 with one line naming the known ones (stats said zeros, breaker status said closed)',
    async () => {
      const known = cleanedQueueName(admin, 'cli-known');
      const empty = cleanedQueueName(admin, 'cli-known-empty');
      const producer = createQueue(known, { connection: redisUrl() });
      onCleanup(() => producer.close());
      await producer.add('job', { n: 1 });
      // Known but empty: only a requeue key (its breaker touched by hand).
      await new BreakerStore(admin, empty, parseBreakerOptions({})).forceClose(queueBreakerKey);
      const typo = `${known}-typo`;
      const runs = await Promise.all([
        requeue('stats', typo),
        requeue('stats', typo, '--json'),
        requeue('breaker', 'status', typo),
        requeue('dlq', 'list', typo),
        requeue('dlq', 'count', typo),
        requeue('limits', typo),
      ]);
      for (const run of runs) {
        expect(run.code, run.stderr).toBe(2);
        expect(run.stdout).toBe('');
        const lines = run.stderr.trimEnd().split('\n');
        expect(lines).toHaveLength(1);
        expect(lines[0]).toMatch(
          new RegExp(`^requeue: <queue>: no queue "${typo}" on this Redis \\(known: .+\\)$`),
        );
      }
      // Nothing was created by looking.
      expect(await admin.keys(`*${typo}*`)).toEqual([]);
      // Known queues, even empty ones, read as before.
      expect(await requeueJson<QueueCounts>('stats', empty)).toMatchObject({ waiting: 0, dead: 0 });
      expect(await requeueJson<QueueCounts>('stats', known)).toMatchObject({ waiting: 1 });
      const status = await requeue('breaker', 'status', empty);
      expect(status.code, status.stderr).toBe(0);
      expect(status.stdout).toMatch(/closed/);
      const dead = await requeue('dlq', 'list', known);
      expect(dead).toMatchObject({ code: 0, stdout: 'no dead jobs\n' });
    },
    CLI_TEST_TIMEOUT_MS,
  );

  it(
    'every read command exits 2 with one line when Redis is unreachable (one exit-code table)',
    async () => {
      const nobody = `redis://127.0.0.1:${await freePort()}`;
      const commands = [
        ['queues'],
        ['queues', '--json'],
        ['stats', 'q'],
        ['breaker', 'status', 'q'],
        ['dlq', 'list', 'q'],
        ['dlq', 'show', 'q', 'x'],
        ['dlq', 'count', 'q'],
        ['limits', 'q'],
        ['endpoint', 'list', 'q'],
        ['doctor'],
      ];
      const runs = await Promise.all(
        commands.map((args) => runTs('src/cli/main.ts', [...args, '--redis', nobody], {}, 30_000)),
      );
      runs.forEach((run, i) => {
        const label = commands[i]!.join(' ');
        expect(run.code, `${label}: ${run.stderr}`).toBe(2);
        expect(run.stderr.trimEnd().split('\n'), label).toHaveLength(1);
        expect(run.stderr, label).toMatch(/^requeue: --redis: cannot reach Redis at /);
      });
    },
    CLI_TEST_TIMEOUT_MS,
  );

  it(
    'fails with one line instead of hanging when Redis does not answer',
    async () => {
      const nobody = `redis://127.0.0.1:${await freePort()}`;
      // Generous: a CLI that gives up on a refused connection does so at once.
      const result = await runTs(
        'src/cli/main.ts',
        ['stats', 'anything', '--redis', nobody],
        {},
        10_000,
      );
      // Exit code 2, README's code for an unreachable Redis (it was 1 here, 2 for doctor).
      expect(result.code, result.stderr).toBe(2);
      expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
      expect(result.stderr).toMatch(
        /^requeue: --redis: cannot reach Redis at redis:\/\/127\.0\.0\.1:\d+ /,
      );
    },
    CLI_TEST_TIMEOUT_MS,
  );

  it(
    'drains the active job on SIGTERM and exits 0',
    async () => {
      const queue = cleanedQueueName(admin, 'cli-drain');
      const marker = `requeue:{${queue}}:test:started`;
      const producer = createQueue(queue, { connection: redisUrl() });
      onCleanup(() => producer.close());
      const { id } = await producer.add('slow', { marker, holdMs: 1_000 });

      const worker = startCliWorker(queue, '--handler', 'test/fixtures/slow-handler.ts');
      const blocking = connect();
      try {
        const started = await Promise.race([
          blocking.blpop(marker, 30),
          worker.exited.then((exit) => {
            throw new Error(`worker exited (${exit.signal ?? exit.code}): ${worker.stderr()}`);
          }),
        ]);
        expect(started?.[1]).toBe(id);
      } finally {
        blocking.disconnect();
      }

      expect(await worker.kill('SIGTERM')).toEqual({ code: 0, signal: null });
      const job = await producer.bull.getJob(id);
      expect(await job?.getState()).toBe('completed');
      expect(job?.returnvalue).toEqual({ heldMs: 1_000 });
    },
    CLI_TEST_TIMEOUT_MS,
  );
});
