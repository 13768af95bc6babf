/**
 * `src/scheduler/bullmq/` is the one folder that knows BullMQ's insides.
 * These tests fail loudly when a BullMQ upgrade changes what it relies on:
 * the version, the key layout, the job hash's fields, the queue backend's
 * `moveToDelayed` with `fieldsToUpdate` and `fetchNext`, the state and the
 * next job that `BullWorker` takes from BullMQ's own scripts, and that the
 * moves are fenced by the job's lock.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { DelayedError, Job, Queue, type JobJson } from 'bullmq';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { emptyJobState, parseJobState } from '../../src/policy/job-state.js';
import { StoredResult } from '../../src/policy/outcome.js';
import { bullKeys, delayedDueAt, delayedScore } from '../../src/scheduler/bullmq/bull-keys.js';
import {
  countDelayedDue,
  nextDelayed,
  readLiveJob,
} from '../../src/scheduler/bullmq/bull-reads.js';
import { BullWorker } from '../../src/scheduler/bullmq/bull-worker.js';
import { JobMoves } from '../../src/scheduler/bullmq/job-moves.js';
import { holdJob } from '../../src/scheduler/bullmq/held-job.js';
import { bullmqVersionProblem } from '../../src/scheduler/bullmq/version.js';
import { onCleanup } from '../harness/cleanup.js';
import { connect, uniqueQueueName } from '../harness/redis.js';
import { admin, takeJob, setup } from './job-moves-helpers.js';

afterAll(() => admin.disconnect());

describe('BullMQ internals used by job-moves.ts', () => {
  it('runs on the BullMQ version it was written against', () => {
    const require = createRequire(import.meta.url);
    const pkg = JSON.parse(readFileSync(require.resolve('bullmq/package.json'), 'utf8')) as {
      version: string;
    };
    expect(bullmqVersionProblem(pkg.version)).toBeUndefined();
  });

  it('knows BullMQ key layout', () => {
    const name = uniqueQueueName('keys');
    const queue = new Queue(name, { connection: admin });
    const keys = bullKeys(name);
    expect(queue.keys.active).toBe(keys.active);
    expect(queue.keys.wait).toBe(keys.wait);
    expect(queue.keys.stalled).toBe(keys.stalled);
    expect(queue.keys.meta).toBe(keys.meta);
    expect(queue.keys.marker).toBe(keys.marker);
    expect(queue.keys.events).toBe(keys.events);
    expect(queue.keys.prioritized).toBe(keys.prioritized);
    expect(queue.keys.pc).toBe(keys.pc);
    expect(queue.toKey('42')).toBe(`${keys.prefix}42`);
    void queue.close();
  });

  it('moves to delayed with the state written in the same step, and counts the attempt', async () => {
    const t = setup('delay');
    await t.queue.add('x', { n: 1 }, { jobId: 'j1' });
    const { worker, job, token } = await takeJob(t.name);
    const moves = new JobMoves(admin, worker, t.name);
    const state = { ...emptyJobState(), previousDelayMs: 7 };
    await moves.delay(holdJob(job), token, state, 60_000, Date.now(), true);
    expect(await t.queue.getJobState('j1')).toBe('delayed');
    const hash = await admin.hgetall(`${bullKeys(t.name).prefix}j1`);
    expect(parseJobState(hash.rq)).toMatchObject({ previousDelayMs: 7 });
    expect(hash.atm).toBe('1');
    expect(hash.ats).toBe('1');
  });

  it('takes a retried job’s state from BullMQ’s fetch: loading it makes no round trip', async () => {
    const t = setup('fetched');
    await t.queue.add('x', { n: 1 }, { jobId: 'j1' });
    const { worker, job, token } = await takeJob(t.name);
    const state = { ...emptyJobState(), previousDelayMs: 7 };
    await new JobMoves(admin, worker, t.name).delay(
      holdJob(job),
      token,
      state,
      0,
      Date.now(),
      true,
    );
    const again = (await worker.getNextJob(token)) as Job;
    expect(again.id).toBe('j1');
    expect(worker.fetchedState(again)).toMatchObject({ rqm: '1', rql: undefined });
    // A client closed for good: any command sent to it would fail.
    const offline = connect();
    await offline.ping();
    offline.disconnect();
    const stored = await new JobMoves(offline, worker, t.name).load(again, token);
    expect(stored.state).toMatchObject({ previousDelayMs: 7 });
    expect(stored.life).toBe(0);
    // A job the capture did not see is read from Redis, as before.
    const unseen = (await Job.fromId(t.queue, 'j1'))!;
    const failed = await new JobMoves(offline, worker, t.name).load(unseen, token).catch((e) => e);
    expect(failed).toBeInstanceOf(Error);
    const read = await new JobMoves(admin, worker, t.name).load(unseen, token);
    expect(read.state).toMatchObject({ previousDelayMs: 7 });
  });

  it('takes the next job with the retry move: no separate fetch between them', async () => {
    const t = setup('next');
    const keys = bullKeys(t.name);
    const connection = connect();
    // The scripts the worker's connection sends, in order (its own sendCommand, watched).
    const scripts: string[] = [];
    const send = connection.sendCommand.bind(connection);
    connection.sendCommand = (command, ...rest) => {
      const [, numKeys, firstKey] = command.args as string[];
      if (
        (command.name === 'evalsha' || command.name === 'eval') &&
        firstKey?.startsWith(keys.prefix)
      )
        scripts.push(
          firstKey === keys.marker
            ? 'moveToDelayed'
            : numKeys === '14'
              ? 'moveToFinished'
              : 'other',
        );
      return send(command, ...rest);
    };
    await t.queue.add('x', { n: 1 }, { jobId: 'j1' });
    await t.queue.add('x', { n: 2 }, { jobId: 'j2' });
    const done = new Promise<void>((resolve) => {
      const worker: BullWorker = new BullWorker(
        t.name,
        async (job, token) => {
          if (job.id === 'j2') {
            resolve();
            return 'ok';
          }
          const fieldsToUpdate = { rq: JSON.stringify(emptyJobState()), rqm: 1 };
          await worker.moveToDelayed(job, token!, Date.now(), 60_000, {
            skipAttempt: false,
            fieldsToUpdate,
          });
          throw new DelayedError('moved');
        },
        { connection, concurrency: 1 },
      );
      onCleanup(async () => {
        await worker.close(true);
        connection.disconnect();
      });
    });
    await done;
    await vi.waitFor(() => expect(scripts).toContain('moveToFinished'));
    const moved = scripts.indexOf('moveToDelayed');
    expect(moved).toBeGreaterThan(-1);
    expect(scripts.slice(moved + 1, scripts.indexOf('moveToFinished'))).toEqual([]);
    expect(await t.queue.getJobState('j1')).toBe('delayed');
  });

  it('completes a job with its state written in the same step, only while the lock is ours', async () => {
    const t = setup('complete');
    await t.queue.add('x', { n: 1 }, { jobId: 'j1' });
    await t.queue.add('x', { n: 2 }, { jobId: 'j2' });
    const { worker, job, token } = await takeJob(t.name);
    const moves = new JobMoves(admin, worker, t.name);
    moves.completeWith(holdJob(job), { ...emptyJobState(), previousDelayMs: 9 });
    await job.moveToCompleted('done', token, false);
    expect(await t.queue.getJobState(String(job.id))).toBe('completed');
    const hash = await admin.hgetall(`${bullKeys(t.name).prefix}${String(job.id)}`);
    expect(parseJobState(hash.rq)).toMatchObject({ previousDelayMs: 9 });
    expect(hash.returnvalue).toBe('"done"');

    const other = (await worker.getNextJob(token)) as Job;
    moves.completeWith(holdJob(other), { ...emptyJobState(), previousDelayMs: 11 });
    // BullMQ's own error, from requeue's copy of its moveToFinished.
    await expect(other.moveToCompleted('x', 'a-token-that-expired', false)).rejects.toThrow(
      /Lock mismatch for job j2\. Cmd moveToFinished/,
    );
    expect(await t.queue.getJobState(String(other.id))).toBe('active');
    expect(await admin.hget(`${bullKeys(t.name).prefix}${String(other.id)}`, 'rq')).toBeNull();
  });

  it('completes a job with a result serialised once: its text stored verbatim, the value never read', async () => {
    const t = setup('complete-once');
    await t.queue.add('x', { n: 1 }, { jobId: 'j1' });
    const { worker, job, token } = await takeJob(t.name);
    const moves = new JobMoves(admin, worker, t.name);
    moves.completeWith(holdJob(job), { ...emptyJobState(), previousDelayMs: 5 });
    const untouchable = {
      get total(): never {
        throw new Error('read again');
      },
    };
    // A spacing JSON.stringify never writes: stored as is, it was not re-serialised.
    await job.moveToCompleted(new StoredResult('{"total": 1}', untouchable), token, false);
    const hash = await admin.hgetall(`${bullKeys(t.name).prefix}${String(job.id)}`);
    expect(hash.returnvalue).toBe('{"total": 1}');
    expect(parseJobState(hash.rq)).toMatchObject({ previousDelayMs: 5 });
    expect(await t.queue.getJobState(String(job.id))).toBe('completed');
  });

  it('takes the state of the job a completion fetches next: loading it makes no round trip', async () => {
    const t = setup('completion-fetch');
    await t.queue.add('x', { n: 1 }, { jobId: 'j1' });
    await t.queue.add('x', { n: 2 }, { jobId: 'j2' });
    // j2 as a retried job would be: an attempt made, requeue's fields in its hash.
    const state = { ...emptyJobState(), previousDelayMs: 5 };
    await admin.hset(`${bullKeys(t.name).prefix}j2`, {
      atm: '1',
      rq: JSON.stringify(state),
      rqm: '1',
    });
    const { worker, job, token } = await takeJob(t.name);
    expect(job.id).toBe('j1');
    const next = (await job.moveToCompleted('done', token, true)) as [JobJson, string];
    expect(next[1]).toBe('j2');
    const made = await (
      worker as unknown as { nextJobFromJobData(d: JobJson, id: string, t: string): Promise<Job> }
    ).nextJobFromJobData(next[0], next[1], token);
    expect(worker.fetchedState(made)).toMatchObject({ rqm: '1' });
    const offline = connect();
    await offline.ping();
    offline.disconnect();
    const stored = await new JobMoves(offline, worker, t.name).load(made, token);
    expect(stored.state).toMatchObject({ previousDelayMs: 5 });
    expect(await t.queue.getJobState('j1')).toBe('completed');
  });

  it('reads the delayed set: scores are dueAt * 0x1000 + n, jobs are where getJobState says', async () => {
    const t = setup('reads');
    const keys = bullKeys(t.name);
    expect(t.queue.keys.delayed).toBe(keys.delayed);
    expect(t.queue.keys.prioritized).toBe(keys.prioritized);
    expect(t.queue.keys.pc).toBe(keys.pc);
    expect(t.queue.keys.completed).toBe(keys.completed);
    expect(t.queue.keys.failed).toBe(keys.failed);
    // Three jobs due in the same millisecond get three scores in that millisecond's range.
    const timestamp = Date.now();
    for (const id of ['a', 'b', 'c'])
      await t.queue.add('x', { id }, { jobId: id, delay: 30_000, timestamp });
    await t.queue.add('x', {}, { jobId: 'later', delay: 7_200_000, timestamp });
    await t.queue.add('x', {}, { jobId: 'now' });
    const scores = (await admin.zrange(keys.delayed, 0, -1, 'WITHSCORES')).filter((_, i) => i % 2);
    expect(scores.map(Number).map(delayedDueAt)).toEqual([
      timestamp + 30_000,
      timestamp + 30_000,
      timestamp + 30_000,
      timestamp + 7_200_000,
    ]);
    expect(Number(scores[0])).toBe(delayedScore(timestamp + 30_000));
    expect(
      await countDelayedDue(admin, t.name, [
        [timestamp, timestamp + 30_000],
        [timestamp + 30_000, timestamp + 30_001],
        [timestamp, timestamp + 3_600_000],
        [-Infinity, Infinity],
      ]),
    ).toEqual([0, 3, 3, 4]);
    const next = await nextDelayed(admin, t.name, 2);
    expect(next.map((j) => [j.id, j.dueAt])).toEqual([
      ['a', timestamp + 30_000],
      ['b', timestamp + 30_000],
    ]);
    for (const id of ['a', 'now']) {
      const job = await readLiveJob(admin, t.name, id);
      expect(job?.where).toBe(await t.queue.getJobState(id));
    }
    expect((await readLiveJob(admin, t.name, 'a'))?.dueAt).toBe(timestamp + 30_000);
    expect(await readLiveJob(admin, t.name, 'missing')).toBeUndefined();
    const { job } = await takeJob(t.name);
    expect(job.id).toBe('now');
    expect((await readLiveJob(admin, t.name, 'now'))?.where).toBe('active');
  });
});
