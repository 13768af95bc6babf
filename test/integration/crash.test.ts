import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { DeadLetterQueue } from '../../src/scheduler/dlq/dead-letter-queue.js';
import { parseJobState, type AttemptRecord } from '../../src/policy/job-state.js';
import { createQueue } from '../../src/scheduler/queue.js';
import { createWorker, type Handler } from '../../src/scheduler/requeue-worker.js';
import { spawnTs, type TsChild } from '../harness/child.js';
import { crashKeys, type CrashMode } from '../harness/crash-keys.js';
import { cleanQueue, connect, jobKey, redisUrl, uniqueQueueName } from '../harness/redis.js';
import { onCleanup } from '../harness/cleanup.js';
import { WorkerEventLog } from '../harness/worker-events.js';

/** Child processes need a second or two to start under tsx; recovery needs a lock to expire. */
const CHILD_TEST_TIMEOUT_MS = 60_000;

const logger = createLogger({ level: 'silent' });
const admin = connect();

afterAll(() => {
  admin.disconnect();
});

function setup(prefix: string) {
  const name = uniqueQueueName(prefix);
  const keys = crashKeys(name);
  const queue = createQueue(name, { connection: redisUrl() });
  const dlq = new DeadLetterQueue(name, { connection: redisUrl() });
  onCleanup(async () => {
    await dlq.close();
    await queue.close();
    await cleanQueue(admin, name);
  });

  /** Starts the crash fixture on this queue; it is killed after the test if still alive. */
  function spawnWorker(mode: CrashMode, maxAttempts = 3): TsChild {
    const child = spawnTs('test/fixtures/crash-worker.ts', [], {
      REDIS_URL: redisUrl(),
      QUEUE: name,
      CRASH_MODE: mode,
      MAX_ATTEMPTS: String(maxAttempts),
    });
    onCleanup(async () => {
      await child.kill('SIGKILL');
    });
    return child;
  }

  /**
   * A worker in this process, with the short locks the fixture uses: stalled
   * jobs are found by the surviving worker's checker.
   */
  function startWorker(handler: Handler<unknown, unknown>) {
    const worker = createWorker(name, handler, {
      connection: redisUrl(),
      logger,
      lockDurationMs: 1000,
      stalledIntervalMs: 500,
      policy: { strategy: 'fixed', baseMs: 50, capMs: 50, maxAttempts: 3 },
    });
    const events = new WorkerEventLog(worker);
    onCleanup(() => worker.close({ timeoutMs: 5_000 }));
    return { worker, events };
  }

  /** Pops the next entry of a list the fixture writes to, failing if `child` exits first. */
  async function nextEntry(key: string, child?: TsChild, timeoutSec = 20): Promise<string> {
    const blocking = connect();
    try {
      const popped = blocking.blpop(key, timeoutSec).then((entry) => {
        if (!entry) throw new Error(`nothing was pushed to ${key} within ${timeoutSec} s`);
        return entry[1];
      });
      if (!child) return await popped;
      const exited = child.exited.then((exit) => {
        throw new Error(
          `the worker exited (${exit.signal ?? exit.code}) before pushing to ${key}\n${child.stderr()}`,
        );
      });
      return await Promise.race([popped, exited]);
    } finally {
      blocking.disconnect();
    }
  }

  async function counter(key: string): Promise<number> {
    return Number((await admin.get(key)) ?? 0);
  }

  async function storedState(id: string) {
    return parseJobState(await admin.hget(jobKey(admin, name, id), 'rq'));
  }

  return { name, keys, queue, dlq, spawnWorker, startWorker, nextEntry, counter, storedState };
}

describe('a worker killed with SIGKILL', () => {
  it(
    'loses nothing and duplicates nothing when killed mid-job',
    async () => {
      const t = setup('crash-hang');
      const child = t.spawnWorker('hang');
      const { id } = await t.queue.add('charge', { amount: 5 });
      expect(await t.nextEntry(t.keys.started, child)).toBe(`${id}:1`);
      expect(await child.kill('SIGKILL')).toEqual({ code: null, signal: 'SIGKILL' });
      expect(await t.queue.bull.getJobState(id)).toBe('active');

      const seen: { attempt: number; history: AttemptRecord[] }[] = [];
      const { events } = t.startWorker(async (job) => {
        seen.push({ attempt: job.attempt, history: [...job.history] });
        await admin.incr(t.keys.completions);
        return 'charged';
      });
      await events.waitFor('job:completed', (e) => e.jobId === id);

      expect(await t.counter(t.keys.completions)).toBe(1);
      expect(await t.counter(t.keys.calls)).toBe(1);
      expect(seen).toHaveLength(1);
      expect(seen[0]!.attempt).toBe(2);
      expect(seen[0]!.history).toEqual([
        expect.objectContaining({ attempt: 1, outcome: 'stalled', decision: 'retry' }),
      ]);
      expect(await t.queue.bull.getJobState(id)).toBe('completed');
      expect((await t.queue.bull.getJob(id))?.returnvalue).toBe('charged');
      expect(await t.dlq.count()).toBe(0);
      expect(await t.queue.counts()).toMatchObject({ waiting: 0, active: 0, delayed: 0 });
    },
    CHILD_TEST_TIMEOUT_MS,
  );

  it(
    'leaves a job dead once, with nothing to finish, when its worker dies right after the move',
    async () => {
      const t = setup('crash-dead');
      const child = t.spawnWorker('die-on-dead');
      const { id } = await t.queue.add('notify', { user: 3 });
      // Killed in onDead: the move to the DLQ was one step, and it is done.
      expect(await child.exited).toEqual({ code: null, signal: 'SIGKILL' });
      expect(await t.counter(t.keys.calls)).toBe(1);
      expect(await t.dlq.count()).toBe(1);
      const record = await t.dlq.get(id);
      expect(record).toMatchObject({ reason: 'permanent-error', attempts: 1, data: { user: 3 } });
      expect(record!.history.map((r) => [r.attempt, r.outcome, r.decision])).toEqual([
        [1, 'failed', 'dead-letter'],
      ]);
      expect(await t.queue.bull.getJobState(id)).toBe('unknown');
      expect(await t.queue.counts()).toEqual({
        waiting: 0,
        active: 0,
        delayed: 0,
        completed: 0,
        failed: 0,
        dead: 1,
      });
    },
    CHILD_TEST_TIMEOUT_MS,
  );

  it(
    'dead-letters a job that kills every worker, once its attempts are used up',
    async () => {
      const t = setup('crash-loop');
      const maxAttempts = 2;
      const { id } = await t.queue.add('poison', { pill: true });
      const dead = t.nextEntry(t.keys.dead, undefined, 50);
      dead.catch(() => undefined);
      const exits: (NodeJS.Signals | number | null)[] = [];
      let deadId: string | undefined;
      // Each crash needs a new worker; the third one finds the attempts used up.
      for (let run = 1; run <= maxAttempts + 2 && deadId === undefined; run += 1) {
        const child = t.spawnWorker('crash', maxAttempts);
        const outcome = await Promise.race([
          child.exited.then((exit) => ({ exit })),
          dead.then((jobId) => ({ jobId })),
        ]);
        if ('jobId' in outcome) {
          deadId = outcome.jobId;
          await child.kill('SIGTERM');
        } else {
          exits.push(outcome.exit.signal ?? outcome.exit.code);
        }
      }

      expect(deadId).toBe(id);
      expect(exits).toEqual(['SIGKILL', 'SIGKILL']);
      expect(await t.counter(t.keys.calls)).toBe(maxAttempts);
      const record = await t.dlq.get(id);
      expect(record).toMatchObject({ reason: 'max-attempts', attempts: maxAttempts });
      expect(record!.history.map((r) => [r.attempt, r.outcome])).toEqual([
        [1, 'stalled'],
        [2, 'stalled'],
      ]);
      expect(await t.queue.bull.getJobState(id)).toBe('unknown');
      expect(await t.dlq.count()).toBe(1);
    },
    CHILD_TEST_TIMEOUT_MS,
  );
});
