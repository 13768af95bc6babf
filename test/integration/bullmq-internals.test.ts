/**
 * Tripwires for the three BullMQ internals that would drift silently on an
 * upgrade (issue 23 item 1): the position of `finishedOn`'s time in
 * `moveToFinished`'s arguments (`redis-time-fetch.ts`), the `handleFailed`
 * path `BullWorker` overrides (`bull-worker.ts`), and the job hash fields
 * BullMQ writes per attempt that replay clears (`replayDead-9.lua`).
 */
import { readFileSync } from 'node:fs';
import { DelayedError, Job, Queue, Worker } from 'bullmq';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { emptyJobState } from '../../src/policy/job-state.js';
import { bullKeys } from '../../src/scheduler/bullmq/bull-keys.js';
import { BullWorker } from '../../src/scheduler/bullmq/bull-worker.js';
import { fetchOnRedisTime } from '../../src/scheduler/bullmq/redis-time-fetch.js';
import { onCleanup } from '../harness/cleanup.js';
import { cleanQueue, connect, uniqueQueueName } from '../harness/redis.js';

const admin = connect();
afterAll(() => admin.disconnect());

function setup(prefix: string) {
  const name = uniqueQueueName(prefix);
  const queue = new Queue(name, { connection: connect() });
  onCleanup(async () => {
    await queue.close();
    await cleanQueue(admin, name);
  });
  return { name, queue, keys: bullKeys(name) };
}

/** A BullWorker on its own connection, closed (forced) after the test. */
function bullWorker(
  name: string,
  processor: ConstructorParameters<typeof BullWorker>[1],
  opts: { autorun?: boolean } = {},
): BullWorker {
  const connection = connect();
  const worker = new BullWorker(name, processor, { connection, concurrency: 1, ...opts });
  onCleanup(async () => {
    await worker.close(true);
    connection.disconnect();
  });
  return worker;
}

/** Every BullMQ place job `id` of the queue is in (promise 1: exactly one). */
async function placesOf(keys: ReturnType<typeof bullKeys>, id: string): Promise<string[]> {
  const places: string[] = [];
  for (const list of ['wait', 'active'] as const)
    if ((await admin.lpos(keys[list], id)) !== null) places.push(list);
  for (const set of ['delayed', 'prioritized', 'completed', 'failed'] as const)
    if ((await admin.zscore(keys[set], id)) !== null) places.push(set);
  return places;
}

describe('BullMQ internals requeue rewrites or overrides', () => {
  it("completes a job with finishedOn at the Redis time requeue passes in moveToFinished's arguments", async () => {
    const t = setup('finished-on');
    // A clock an hour ahead of this process's: a finishedOn of BullMQ's own Date.now() differs.
    const redisTime = Date.now() + 3_600_000;
    const worker = bullWorker(t.name, () => 'ok', { autorun: false });
    fetchOnRedisTime(worker, { now: () => redisTime });
    const completed = new Promise<void>((resolve) => worker.on('completed', () => resolve()));
    await t.queue.add('x', { n: 1 }, { jobId: 'j1' });
    void worker.run();
    await completed;
    const job = await Job.fromId(t.queue, 'j1');
    expect(job?.finishedOn).toBe(redisTime);
    expect(await placesOf(t.keys, 'j1')).toEqual(['completed']);
  });

  it("a processor throwing BullMQ's RateLimitError leaves the job in one place, never failed", async () => {
    const t = setup('rate-limit');
    let calls = 0;
    const worker: BullWorker = bullWorker(t.name, async () => {
      calls += 1;
      if (calls === 1) {
        await worker.rateLimit(20);
        throw Worker.RateLimitError();
      }
      return 'ok';
    });
    const completed = new Promise<void>((resolve) => worker.on('completed', () => resolve()));
    await t.queue.add('x', { n: 1 }, { jobId: 'j1' });
    await completed;
    expect(calls).toBe(2);
    expect(await placesOf(t.keys, 'j1')).toEqual(['completed']);
    expect(await admin.zcard(t.keys.failed)).toBe(0);
  });

  it('a worker closing while a retried job fails leaves each job in one place, never failed', async () => {
    const t = setup('closing-fail');
    await t.queue.add('x', { n: 1 }, { jobId: 'j1' });
    await t.queue.add('x', { n: 2 }, { jobId: 'j2' });
    let closed: Promise<void> | undefined;
    const moved = new Promise<void>((resolve) => {
      const worker: BullWorker = bullWorker(t.name, async (job, token) => {
        if (job.id !== 'j1') return 'ok';
        // requeue's retry of j1, taking j2 in the same script; the worker starts closing
        // before BullMQ's handleFailed sees j1's DelayedError.
        await worker.moveToDelayed(job, token!, Date.now(), 60_000, {
          skipAttempt: false,
          fieldsToUpdate: { rq: JSON.stringify(emptyJobState()), rqm: 1 },
        });
        closed = worker.close();
        resolve();
        throw new DelayedError('moved');
      });
    });
    await moved;
    await closed;
    expect(await placesOf(t.keys, 'j1')).toEqual(['delayed']);
    // j2, taken by j1's move, is handed to BullMQ's loop (not left active): the close runs it.
    expect(await placesOf(t.keys, 'j2')).toEqual(['completed']);
    expect(await admin.zcard(t.keys.failed)).toBe(0);
  });

  it("replay clears every job hash field BullMQ's own worker writes per attempt", async () => {
    const t = setup('attempt-fields');
    const fieldsAt = async (id: string) => Object.keys(await admin.hgetall(t.keys.prefix + id));
    await t.queue.add('x', { n: 1 }, { jobId: 'fails', attempts: 2, backoff: 1 });
    await t.queue.add('x', { n: 2 }, { jobId: 'completes', attempts: 2, backoff: 1 });
    const added = new Set([...(await fieldsAt('fails')), ...(await fieldsAt('completes'))]);
    const seen = new Set<string>();
    const connection = connect();
    const worker = new Worker(
      t.name,
      async (job) => {
        for (const field of await fieldsAt(String(job.id))) seen.add(field);
        if (job.id === 'fails' || job.attemptsMade === 0) throw new Error('boom');
        return 'ok';
      },
      { connection, name: 'bullmq-own', concurrency: 1 },
    );
    onCleanup(async () => {
      await worker.close(true);
      connection.disconnect();
    });
    await vi.waitFor(
      async () => {
        expect(await placesOf(t.keys, 'fails')).toEqual(['failed']);
        expect(await placesOf(t.keys, 'completes')).toEqual(['completed']);
      },
      { timeout: 10_000 },
    );
    for (const id of ['fails', 'completes']) for (const f of await fieldsAt(id)) seen.add(f);
    const perAttempt = [...seen].filter((f) => !added.has(f)).sort();
    // What the test saw, so a BullMQ upgrade that writes a new field shows here too.
    expect(perAttempt).toEqual(
      expect.arrayContaining(['atm', 'ats', 'failedReason', 'finishedOn', 'processedOn']),
    );
    const script = readFileSync(
      new URL('../../src/redis/lua/replayDead-9.lua', import.meta.url),
      'utf8',
    );
    const hdel = /rcall\('HDEL', jobKey,([^)]*)\)/.exec(script);
    const hset = /rcall\('HSET', jobKey,([^)]*)\)/.exec(script);
    // The fields each names, not the commands of a nested rcall.
    const names = (text: string | undefined) =>
      [...(text ?? '').matchAll(/'([a-z][A-Za-z]*)'/g)].map((m) => m[1]);
    const handled = new Set([...names(hdel?.[1]), ...names(hset?.[1])]);
    // Kept on purpose: BullMQ's attempt counts carry over a replay (`rqo` is the offset).
    const keptOnPurpose = new Set(['atm', 'ats']);
    expect(perAttempt.filter((f) => !handled.has(f) && !keptOnPurpose.has(f))).toEqual([]);
  });
});
