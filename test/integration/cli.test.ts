import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { DeadLetterQueue } from '../../src/scheduler/dlq/dead-letter-queue.js';
import { createQueue, type QueueCounts } from '../../src/scheduler/queue.js';
import { createWorker, type Handler } from '../../src/scheduler/requeue-worker.js';
import { loadHandlerModule } from '../../src/util/load-module.js';
import { cleanedQueueName, connect, redisUrl } from '../harness/redis.js';
import { onCleanup } from '../harness/cleanup.js';
import { WorkerEventLog } from '../harness/worker-events.js';
import {
  CLI_TEST_TIMEOUT_MS,
  handlerModule,
  requeue,
  requeueJson,
  startCliWorker,
  statsUntil,
  expectUsageError,
} from './cli-helpers.js';

const admin = connect();

afterAll(() => {
  admin.disconnect();
});

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
