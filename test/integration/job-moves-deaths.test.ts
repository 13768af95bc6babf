import { afterAll, describe, expect, it } from 'vitest';
import { emptyJobState } from '../../src/policy/job-state.js';
import { requeueKeys } from '../../src/redis/keys.js';
import { DeadLetterQueue } from '../../src/scheduler/dlq/dead-letter-queue.js';
import { bullKeys } from '../../src/scheduler/bullmq/bull-keys.js';
import { JobMoves } from '../../src/scheduler/bullmq/job-moves.js';
import { holdJob } from '../../src/scheduler/bullmq/held-job.js';
import { newJobId } from '../../src/util/system.js';
import { admin, takeJob, setup, deathJson } from './job-moves-helpers.js';

/**
 * BullMQ internals that job-moves.ts relies on, for deaths and fencing: a move
 * refused under someone else's lock, the keyless death's marker, a merge that
 * lost to a replay, and the one-step dead-letter (the rest is in
 * `job-moves.test.ts`).
 */

afterAll(() => admin.disconnect());

describe('BullMQ internals used by job-moves.ts', () => {
  it('refuses to delay or dead-letter a job whose lock is someone else’s', async () => {
    const t = setup('fence');
    await t.queue.add('x', { n: 1 }, { jobId: 'j1' });
    const { worker, job } = await takeJob(t.name);
    const moves = new JobMoves(admin, worker, t.name);
    const stale = 'a-token-that-expired';
    await expect(
      moves.delay(holdJob(job), stale, emptyJobState(), 10, Date.now(), true),
    ).rejects.toThrow();
    const dead = await moves.deadLetter(
      holdJob(job),
      stale,
      emptyJobState(),
      deathJson(),
      Date.now(),
    );
    expect(dead).toEqual({ kind: 'lock-lost' });
    expect(await t.queue.getJobState('j1')).toBe('active');
    expect(await admin.zcard(requeueKeys(t.name).dead)).toBe(0);
  });

  it('a keyless death leaves a marker: a re-sent add of its id is a no-op, and a replay takes the id back', async () => {
    const t = setup('resend-guard');
    // A producer's id, as requeue gives every keyless job (a replay keeps only such ids).
    const j1 = newJobId();
    await t.queue.add('x', { n: 1 }, { jobId: j1 });
    const { worker, job, token } = await takeJob(t.name);
    const moves = new JobMoves(admin, worker, t.name);
    const moved = await moves.deadLetter(
      holdJob(job),
      token,
      emptyJobState(),
      deathJson(),
      1234,
      '',
      60_000,
    );
    expect(moved).toMatchObject({ kind: 'moved' });
    const marker = `${bullKeys(t.name).prefix}${j1}`;
    expect(await admin.hgetall(marker)).toEqual({
      rqgone: (moved as { generation: string }).generation,
    });
    const ttl = await admin.pttl(marker);
    expect(ttl).toBeGreaterThan(50_000);
    expect(ttl).toBeLessThanOrEqual(60_000);
    // What the client sends again after a reconnect: BullMQ's add of the same id.
    await t.queue.add('x', { n: 1 }, { jobId: j1 });
    expect(await t.queue.getJobCounts('wait', 'active', 'delayed', 'completed')).toEqual({
      wait: 0,
      active: 0,
      delayed: 0,
      completed: 0,
    });
    // A replay takes the marker's id: the dead job comes back as itself.
    const dlq = new DeadLetterQueue(t.name, { connection: admin });
    const replayed = await dlq.replay({ id: j1 });
    expect(replayed).toMatchObject({ done: 1 });
    expect('renamed' in replayed ? replayed.renamed : []).toEqual([]);
    expect(await t.queue.getJobState(j1)).toBe('waiting');
    expect(await admin.hget(marker, 'rqgone')).toBeNull();
    expect(await admin.pttl(marker)).toBe(-1);
  });

  it('a merge expecting an earlier death that a replay took meanwhile stores nothing and says so', async () => {
    const t = setup('vanished');
    await t.queue.add('x', { n: 1 }, { jobId: 'j1' });
    const { worker, job, token } = await takeJob(t.name);
    const moves = new JobMoves(admin, worker, t.name);
    const result = await moves.deadLetter(
      holdJob(job),
      token,
      emptyJobState(),
      deathJson(),
      1234,
      '7',
    );
    expect(result).toEqual({ kind: 'vanished' });
    expect(await t.queue.getJobState('j1')).toBe('active');
    expect(await admin.zcard(requeueKeys(t.name).dead)).toBe(0);
    expect(
      await moves.deadLetter(holdJob(job), token, emptyJobState(), deathJson(), 1234),
    ).toMatchObject({
      kind: 'moved',
    });
  });

  it('dead-letters in one step: out of active, into the DLQ with the hash and the death', async () => {
    const t = setup('dead');
    await t.queue.add('x', { n: 1 }, { jobId: 'j1' });
    const { worker, job, token } = await takeJob(t.name);
    const moves = new JobMoves(admin, worker, t.name);
    const result = await moves.deadLetter(holdJob(job), token, emptyJobState(), deathJson(), 1234);
    expect(result).toMatchObject({ kind: 'moved' });
    expect(await t.queue.getJobState('j1')).toBe('unknown');
    expect(await admin.exists(`${bullKeys(t.name).prefix}j1:lock`)).toBe(0);
    expect(await admin.lrange(bullKeys(t.name).active, 0, -1)).toEqual([]);
    const dlq = new DeadLetterQueue(t.name, { connection: admin });
    const record = await dlq.get('j1');
    expect(record).toMatchObject({
      id: 'j1',
      name: 'x',
      data: { n: 1 },
      reason: 'permanent-error',
      deadAt: 1234,
    });
    expect(record!.gen).toBe((result as { generation: string }).generation);
  });
});
