import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { freePort } from '../../src/redis/redis-server.js';
import { createQueue, type QueueCounts } from '../../src/scheduler/queue.js';
import { createWorker, queueBreakerKey } from '../../src/scheduler/requeue-worker.js';
import { parseBreakerOptions } from '../../src/policy/breaker/breaker-options.js';
import { BreakerStore } from '../../src/redis/breaker-store.js';
import type { QueueSummary } from '../../src/cli/commands/queues.js';
import { seedDead } from '../harness/dlq.js';
import { runTs } from '../harness/child.js';
import { cleanedQueueName, connect, redisUrl } from '../harness/redis.js';
import { onCleanup } from '../harness/cleanup.js';
import { CLI_TEST_TIMEOUT_MS, requeue, requeueJson } from './cli-helpers.js';

/**
 * The requeue CLI and the queues on its Redis: `queues`, an unknown queue, and a
 * Redis that is unreachable or does not answer (the work itself, usage errors
 * and SIGTERM are in `cli.test.ts`).
 */

const admin = connect();

afterAll(() => {
  admin.disconnect();
});

describe('the requeue CLI', () => {
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
});
