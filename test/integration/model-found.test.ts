/**
 * Regression tests for what the model-based suite (test/model/) found, each
 * named after what broke. The seed and shrunk sequence that found each one
 * are in its comment.
 */
import { afterAll, describe, expect, it, vi } from 'vitest';
import { Redis } from 'ioredis';
import {
  BreakerStore,
  DeadLetterQueue,
  PermanentError,
  createQueue,
  createWorker,
  parseBreakerOptions,
  queueBreakerKey,
} from '../../src/index.js';
import { createLogger } from '../../src/config/logger.js';
import { onCleanup } from '../harness/cleanup.js';
import {
  cleanQueue,
  connect,
  redisUrl,
  startRedisServer,
  uniqueQueueName,
} from '../harness/redis.js';

const logger = createLogger({ level: 'silent' });
const admin = connect();

afterAll(() => {
  admin.disconnect();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until `name` has nothing waiting, delayed or active, three polls in a row. */
async function settled(queue: ReturnType<typeof createQueue>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let quiet = 0;
  while (Date.now() < deadline) {
    const c = await queue.bull.getJobCounts('wait', 'prioritized', 'delayed', 'active');
    quiet = Object.values(c).every((n) => n === 0) ? quiet + 1 : 0;
    if (quiet >= 3) return;
    await sleep(100);
  }
  throw new Error(`queue ${queue.name} did not settle within ${timeoutMs} ms`);
}

describe('found by the model-based suite', () => {
  // Seed 2, shrunk to: keylessAddsDuringRedisRestart(n=1, killAfterMs=0, result-circular).
  it('a keyless add in flight when Redis dies creates one job, not one per re-send', async () => {
    const server = await startRedisServer({ appendonly: true, args: ['--appendfsync', 'always'] });
    onCleanup(() => server.stop());
    const name = uniqueQueueName('resend');
    const queue = createQueue(name, { connection: server.url });
    onCleanup(() => queue.close());
    const perRound = 10;
    let sent = 0;
    const ids: string[] = [];
    // Each round sends adds, then kills Redis a little later, so that some were
    // run (and written to the AOF) but not answered: ioredis re-sends every
    // unanswered command once it has reconnected.
    for (const killAfterMs of [0, 1, 2, 3, 5, 8]) {
      const pending = Array.from({ length: perRound }, (_, n) => queue.add('pay', { n }));
      sent += perRound;
      await sleep(killAfterMs);
      await server.kill();
      await server.restart();
      ids.push(...(await Promise.all(pending)).map((a) => a.id));
    }

    const counts = await queue.bull.getJobCounts('wait', 'prioritized', 'delayed', 'active');
    const jobs = Object.values(counts).reduce((a, b) => a + b, 0);
    expect(new Set(ids).size).toBe(sent);
    expect(jobs).toBe(sent);
  }, 30_000);

  // Seed 2 (the same sequence): the handler's result was a circular object.
  it.each([
    [
      'a circular object',
      () => {
        const loop: Record<string, unknown> = {};
        loop.self = loop;
        return loop;
      },
    ],
    ['a BigInt', () => 10n ** 30n],
  ])(
    "a result that cannot be stored (%s) ends completed or dead, never in BullMQ's failed set",
    async (_what, result) => {
      const name = uniqueQueueName('unstorable');
      const queue = createQueue(name, { connection: redisUrl() });
      const worker = createWorker(name, async () => result(), {
        connection: redisUrl(),
        logger,
        policy: { strategy: 'fixed', baseMs: 10, capMs: 10, maxAttempts: 2 },
      });
      onCleanup(async () => {
        await worker.close({ timeoutMs: 5_000 });
        await queue.close();
        await cleanQueue(admin, name);
      });
      await queue.add('report', { n: 1 });
      await settled(queue);
      const counts = await queue.counts();
      expect(counts.failed).toBe(0);
      expect(counts.completed + counts.dead).toBe(1);
    },
    30_000,
  );

  // Seed 7, shrunk to: add(keyless, ok | permanent), statusReads(), statusReads() with a
  // worker breaker of 10 s / 5 buckets, read with 600 ms / 6 buckets.
  it("breaker status read with other bucket options than the workers' writes nothing", async () => {
    const server = await startRedisServer({ appendonly: false });
    onCleanup(() => server.stop());
    const writer = new Redis(server.url);
    onCleanup(() => writer.disconnect());
    await writer.call(
      'ACL',
      'SETUSER',
      'reader',
      'on',
      '>reader-pw',
      '~*',
      '&*',
      '+@read',
      '+@connection',
      '+@scripting',
      '+info',
      '+client',
      '+time',
      '-@write',
    );
    const name = uniqueQueueName('status');
    const workers = new BreakerStore(
      writer,
      name,
      parseBreakerOptions({ windowMs: 10_000, buckets: 5 }),
    );
    await workers.record(
      queueBreakerKey,
      { successes: 3, failures: 2, trailingFailures: 1 },
      Date.now(),
    );
    const keys = (await writer.keys('*')).sort();
    const before = await Promise.all(keys.map((k) => writer.dump(k)));

    const reader = new Redis(server.url, { username: 'reader', password: 'reader-pw' });
    onCleanup(() => reader.disconnect());
    const laptop = new BreakerStore(
      reader,
      name,
      parseBreakerOptions({ windowMs: 600, buckets: 6 }),
    );
    const status = await laptop.status(queueBreakerKey, Date.now());

    expect(status.window).toMatchObject({ total: 5, failures: 2 });
    expect((await writer.keys('*')).sort()).toEqual(keys);
    expect(await Promise.all(keys.map((k) => writer.dump(k)))).toEqual(before);
  }, 30_000);
  // Found by a scenario of the suite's commands (add(k0, permanent), add(k0, ok), replay(all)):
  // the replay's add was a no-op because k0 was taken, and the dead record was deleted anyway.
  it('replaying a dead job whose key was re-used and completed since keeps it (under a fresh id)', async () => {
    const name = uniqueQueueName('reused-key');
    const queue = createQueue(name, { connection: redisUrl() });
    const dlq = new DeadLetterQueue(name, { connection: redisUrl() });
    const runs: { attempt: number; data: unknown }[] = [];
    const worker = createWorker<{ fail: boolean }>(
      name,
      async (job) => {
        runs.push({ attempt: job.attempt, data: job.data });
        if (job.data.fail) throw new PermanentError('first life fails');
        return 'ok';
      },
      {
        connection: redisUrl(),
        logger,
        policy: { strategy: 'fixed', baseMs: 10, capMs: 10, maxAttempts: 2 },
      },
    );
    onCleanup(async () => {
      await worker.close({ timeoutMs: 5_000 });
      await dlq.close();
      await queue.close();
      await cleanQueue(admin, name);
    });

    await queue.add('charge', { fail: true }, { idempotencyKey: 'order-1' });
    await settled(queue);
    expect(await dlq.count({})).toBe(1);
    // The key is free again (its job is dead): a new job under it completes.
    await queue.add('charge', { fail: false }, { idempotencyKey: 'order-1' });
    await settled(queue);

    const result = await dlq.replay({});
    await settled(queue);
    expect(result.done).toBe(1);
    // The dead job ran again (and failed again, as its data says): it is dead, not gone.
    expect(runs.filter((r) => (r.data as { fail: boolean }).fail)).toHaveLength(2);
    const dead = await dlq.list({}, { offset: 0, limit: 10 });
    expect(dead).toHaveLength(1);
    expect(dead[0]!.data).toEqual({ fail: true });
    expect((await queue.counts()).completed).toBe(1);
  }, 30_000);

  // Seed 20261123, shrunk to: add(key=k1, annotate-fail), …, add(key=k1, retry). The
  // first job under k1 died; the key's next job died too and its death merged the
  // first's history in. The first job's attempts had annotated { seq } and then a
  // value that cannot be stored, and that one bad value replaced all their details:
  // the merged record no longer said which job those attempts belonged to.
  it('an annotation that cannot be stored keeps the attempt’s other annotations (a merged death still names both jobs)', async () => {
    const name = uniqueQueueName('annotate-merge');
    const queue = createQueue(name, { connection: redisUrl() });
    const dlq = new DeadLetterQueue(name, { connection: redisUrl() });
    const worker = createWorker<{ life: number; bad: boolean }>(
      name,
      async (job) => {
        job.annotate({ life: job.data.life });
        if (job.data.bad) job.annotate({ big: 2n });
        throw new Error('retry me');
      },
      {
        connection: redisUrl(),
        logger,
        policy: { strategy: 'fixed', baseMs: 5, capMs: 5, maxAttempts: 2 },
      },
    );
    onCleanup(async () => {
      await worker.close({ timeoutMs: 5_000 });
      await dlq.close();
      await queue.close();
      await cleanQueue(admin, name);
    });

    await queue.add('x', { life: 1, bad: true }, { idempotencyKey: 'k1' });
    await settled(queue);
    await queue.add('x', { life: 2, bad: false }, { idempotencyKey: 'k1' });
    await settled(queue);

    const dead = await dlq.list({}, { offset: 0, limit: 10 });
    expect(dead).toHaveLength(1);
    const details = dead[0]!.history.map((entry) => entry.details);
    expect(details).toEqual([
      { life: 1, annotateError: expect.stringMatching(/^left out big \(not storable as JSON/) },
      { life: 1, annotateError: expect.stringMatching(/^left out big/) },
      { life: 2 },
      { life: 2 },
    ]);
  }, 30_000);

  // Seed 20261124, run 108: keylessAddsDuringRedisRestart(…, permanent-status | retry), then
  // a replay. The add ran before Redis died but its reply was lost; once Redis was
  // back, a worker ran the job and dead-lettered it before the producer re-sent the
  // add, which found no job under the id and made it again. The job ran once more,
  // and a replay meanwhile (the id taken) brought the dead one back under a fresh
  // id: one logical job, two dead records.
  it('a keyless add re-sent after its job already died does not make it again', async () => {
    const server = await startRedisServer({ appendonly: false });
    onCleanup(() => server.kill());
    const name = uniqueQueueName('resend-after-death');
    // The producer reconnects a second after losing its connection; the worker at once.
    const producer = new Redis(server.url, {
      maxRetriesPerRequest: null,
      retryStrategy: () => 1_000,
    });
    const queue = createQueue(name, { connection: producer });
    let runs = 0;
    const worker = createWorker(
      name,
      async () => {
        runs += 1;
        throw new PermanentError('bad request');
      },
      { connection: server.url, logger },
    );
    const dlq = new DeadLetterQueue(name, { connection: server.url });
    onCleanup(async () => {
      await worker.close({ timeoutMs: 2_000 });
      await dlq.close();
      await queue.close();
      producer.disconnect();
    });
    await worker.waitUntilReady();
    await queue.bull.waitUntilReady();
    const died = new Promise((resolve) => worker.on('job:dead-lettered', resolve));
    // Redis frozen: the add sits in its socket; the producer's connection is cut, so
    // the add runs when Redis thaws but its reply is lost, and the client re-sends it
    // once it has reconnected, a second later: after the worker has run the job.
    server.signal('SIGSTOP');
    const added = queue.add('x', { n: 1 });
    await sleep(100);
    (producer as unknown as { stream: { destroy(): void } }).stream.destroy();
    server.signal('SIGCONT');
    await died;
    const { id } = await added;
    await sleep(300);
    const counts = await queue.bull.getJobCounts('wait', 'delayed', 'active', 'completed');
    expect(counts).toEqual({ wait: 0, delayed: 0, active: 0, completed: 0 });
    expect(runs).toBe(1);
    // A replay brings it back as itself, not under a fresh id beside a second job.
    const replayed = await dlq.replay({ id });
    expect(replayed).toMatchObject({ done: 1 });
    expect('renamed' in replayed ? replayed.renamed : []).toEqual([]);
    await vi.waitFor(() => expect(runs).toBe(2), { timeout: 5_000 });
    await sleep(200);
    expect(await dlq.count({})).toBe(1);
    expect((await dlq.get(id))?.replays).toBe(1);
  }, 30_000);
});
