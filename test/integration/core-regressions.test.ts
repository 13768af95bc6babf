/**
 * One regression test per failure listed in issue 8, each named after what
 * broke. They run the real worker against the real Redis of the run (or a
 * private redis-server where a fault needs one).
 */
import { Writable } from 'node:stream';
import { Queue } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { RequeueMetrics } from '../../src/scheduler/metrics.js';
import { PermanentError } from '../../src/errors/permanent-error.js';
import { createRedis } from '../../src/redis/connection.js';
import { startRedisServer } from '../../src/redis/redis-server.js';
import { DeadLetterQueue, type DeadJobRecord } from '../../src/scheduler/dlq/dead-letter-queue.js';
import { createQueue } from '../../src/scheduler/queue.js';
import {
  createWorker,
  type Handler,
  type WorkerOptions,
} from '../../src/scheduler/requeue-worker.js';
import { onCleanup } from '../harness/cleanup.js';
import { seedDead } from '../harness/dlq.js';
import { cleanQueue, connect, redisUrl, uniqueQueueName } from '../harness/redis.js';
import { WorkerEventLog } from '../harness/worker-events.js';

const logger = createLogger({ level: 'silent' });
const admin = connect();
afterAll(() => admin.disconnect());

const fast = { strategy: 'fixed', baseMs: 10, capMs: 10, maxAttempts: 3 } as const;

function setup(prefix: string) {
  const name = uniqueQueueName(prefix);
  const queue = createQueue(name, { connection: redisUrl() });
  const dlq = new DeadLetterQueue(name, { connection: redisUrl(), logger });
  onCleanup(async () => {
    await dlq.close();
    await queue.close();
    await cleanQueue(admin, name);
  });
  function startWorker(handler: Handler<unknown, unknown>, options: WorkerOptions = {}) {
    const worker = createWorker(name, handler, {
      connection: redisUrl(),
      logger,
      policy: fast,
      ...options,
    });
    const events = new WorkerEventLog(worker);
    onCleanup(() => worker.close({ timeoutMs: 5_000 }));
    return { worker, events };
  }
  /** Where each job of the queue is: BullMQ's states and the DLQ, read-only. */
  async function placesOf(): Promise<Map<string, string[]>> {
    const places = new Map<string, string[]>();
    const add = (id: string, place: string) => places.set(id, [...(places.get(id) ?? []), place]);
    for (const state of [
      'wait',
      'prioritized',
      'delayed',
      'active',
      'completed',
      'failed',
    ] as const) {
      for (const job of await queue.bull.getJobs([state], 0, -1)) add(String(job.id), state);
    }
    for (const record of await dlq.list({}, { limit: 100_000 })) add(record.id, 'dead');
    return places;
  }
  return { name, queue, dlq, startWorker, placesOf };
}

describe('issue 8 regressions', () => {
  it('replay while a worker re-kills the job runs it once and never loses it', async () => {
    const t = setup('replay-runaway');
    let calls = 0;
    const { events } = t.startWorker(async () => {
      calls += 1;
      throw new PermanentError('still broken');
    });
    const { id } = await t.queue.add('sync', { n: 1 });
    await events.waitForCount('job:dead-lettered', 1);
    expect(calls).toBe(1);

    const replayed = await t.dlq.replay({});
    expect(replayed).toEqual({ done: 1, total: 1, renamed: [] });
    await events.waitForCount('job:dead-lettered', 2);
    // A second replay of the same snapshot is impossible; the job is dead again, once.
    expect(calls).toBe(2);
    const record = await t.dlq.get(id);
    expect(record?.replays).toBe(1);
    expect(record?.history.map((r) => [r.replay, r.decision])).toEqual([
      [0, 'dead-letter'],
      [1, 'dead-letter'],
    ]);
    expect(await t.placesOf()).toEqual(new Map([[id, ['dead']]]));
  });

  it('replay never removes a newer death of the same id than the one it read', async () => {
    const t = setup('replay-fence');
    await seedDead(admin, {
      source: t.name,
      id: 'k1',
      name: 'job',
      data: { v: 1 },
      opts: {},
      reason: 'permanent-error',
      message: 'first',
      attempts: 1,
      history: [],
      deadAt: Date.now(),
      replays: 0,
    });
    const read = await t.dlq.get('k1');
    // The same id dies again (a newer death) between the replay's read and its move.
    await seedDead(admin, { ...read!, message: 'second', deadAt: Date.now() + 1 });
    const purged = await t.dlq.purge({ id: 'k1' });
    expect(purged.done).toBe(1);
    // A stale purge, fenced by the old generation, leaves a newer record alone.
    const newer = await seedDead(admin, { ...read!, message: 'third', deadAt: Date.now() + 2 });
    const stale = await admin.eval(
      "return redis.call('HGET', KEYS[1], 'gen')",
      1,
      `requeue:{${t.name}}:dead:k1`,
    );
    expect(stale).toBe(newer);
    expect(read!.gen).not.toBe(newer);
    const { runScript } = await import('../../src/redis/scripts.js');
    const removed = await runScript(
      admin,
      'purgeDead',
      [`requeue:{${t.name}}:dead`],
      [`requeue:{${t.name}}:dead:`, 'k1', read!.gen],
    );
    expect(removed).toBe(0);
    expect((await t.dlq.get('k1'))?.message).toBe('third');
  });

  it('replay of a dead job whose key was re-used and completed keeps it under a fresh id', async () => {
    const t = setup('replay-taken');
    const seen: { id: string; key: string | undefined; data: unknown; history: number }[] = [];
    const { events } = t.startWorker(async (job) => {
      seen.push({
        id: job.id,
        key: job.idempotencyKey,
        data: job.data,
        history: job.history.length,
      });
      if ((job.data as { fail: boolean }).fail) throw new PermanentError('bad');
      return 'ok';
    });
    const { id } = await t.queue.add('mail', { fail: true }, { idempotencyKey: 'order-9' });
    await events.waitFor('job:dead-lettered', (e) => e.jobId === id);
    // The key is re-used while its first job is dead; that job completes and keeps the id.
    const again = await t.queue.add('mail', { fail: false }, { idempotencyKey: 'order-9' });
    expect(again.id).toBe(id);
    await events.waitFor('job:completed', (e) => e.jobId === id);

    const result = await t.dlq.replay({ id });
    expect(result.done).toBe(1);
    expect(result.renamed).toHaveLength(1);
    const fresh = result.renamed[0]!;
    expect(fresh.from).toBe(id);
    expect(fresh.to).not.toBe(id);
    await events.waitFor('job:dead-lettered', (e) => e.jobId === fresh.to);
    const record = await t.dlq.get(fresh.to);
    expect(record).toMatchObject({ idempotencyKey: 'order-9', data: { fail: true }, replays: 1 });
    expect(record!.history).toHaveLength(2);
    expect(seen.at(-1)).toMatchObject({ id: fresh.to, key: 'order-9', history: 1 });
    const places = await t.placesOf();
    expect(places.get(id)).toEqual(['completed']);
    expect(places.get(fresh.to)).toEqual(['dead']);
  });

  it('a throwing event listener changes no job fate, and onDead still runs once per death', async () => {
    const t = setup('listener-throws');
    const dead: DeadJobRecord[] = [];
    const { worker, events } = t.startWorker(
      async (job) => {
        const { kind } = job.data as { kind: string };
        if (kind === 'permanent') throw new PermanentError('no');
        if (kind === 'flaky' && job.attempt === 1) throw new Error('once');
        return 'ok';
      },
      { onDead: (record) => void dead.push(record) },
    );
    for (const event of ['job:dead-lettered', 'retry:scheduled', 'job:completed'] as const)
      worker.on(event, () => {
        throw new Error(`listener of ${event} throws`);
      });
    worker.on('job:completed', async () => {
      throw new Error('an async listener rejects');
    });
    const ok = await t.queue.add('a', { kind: 'ok' });
    const flaky = await t.queue.add('b', { kind: 'flaky' });
    const permanent = await t.queue.add('c', { kind: 'permanent' });
    await events.waitForCount('job:completed', 2);
    await events.waitForCount('job:dead-lettered', 1);

    expect(dead.map((r) => r.id)).toEqual([permanent.id]);
    expect(events.all('job:dead-lettered')).toHaveLength(1);
    expect(events.all('bull:failed')).toEqual([]);
    const places = await t.placesOf();
    expect(places.get(ok.id)).toEqual(['completed']);
    expect(places.get(flaky.id)).toEqual(['completed']);
    expect(places.get(permanent.id)).toEqual(['dead']);
  });

  it('a result or annotation that cannot be stored, or a hostile throw, never reaches the failed set', async () => {
    const t = setup('unstorable');
    const hostile = {
      get message(): string {
        throw new Error('message getter');
      },
      get name(): string {
        throw new Error('name getter');
      },
      get status(): number {
        throw new Error('status getter');
      },
    };
    const { events } = t.startWorker(async (job) => {
      const { kind } = job.data as { kind: string };
      if (kind === 'bigint') return { total: 10n };
      if (kind === 'cycle') {
        const cycle: Record<string, unknown> = {};
        cycle.self = cycle;
        return cycle;
      }
      if (kind === 'annotate') {
        const cycle: Record<string, unknown> = {};
        cycle.self = cycle;
        job.annotate({ cycle, big: 1n });
        throw new PermanentError('with a bad annotation');
      }
      throw hostile;
    });
    const ids = {
      bigint: (await t.queue.add('x', { kind: 'bigint' })).id,
      cycle: (await t.queue.add('x', { kind: 'cycle' })).id,
      annotate: (await t.queue.add('x', { kind: 'annotate' })).id,
      hostile: (await t.queue.add('x', { kind: 'hostile' })).id,
    };
    await events.waitForCount('job:completed', 2);
    await events.waitForCount('job:dead-lettered', 2);
    const places = await t.placesOf();
    expect(places.get(ids.bigint)).toEqual(['completed']);
    expect(places.get(ids.cycle)).toEqual(['completed']);
    expect(places.get(ids.annotate)).toEqual(['dead']);
    expect(places.get(ids.hostile)).toEqual(['dead']);
    expect(events.all('bull:failed')).toEqual([]);
    const stored = await t.queue.bull.getJob(ids.bigint);
    expect(stored?.returnvalue).toMatchObject({ requeueUnstorableResult: expect.any(String) });
    const annotated = await t.dlq.get(ids.annotate);
    expect(annotated?.history[0]?.details).toMatchObject({ annotateError: expect.any(String) });
    const thrown = await t.dlq.get(ids.hostile);
    expect(thrown).toMatchObject({ reason: 'max-attempts', attempts: 3 });
  });

  it('a hanging handler is an attempt that times out, retried, then dead-lettered', async () => {
    const t = setup('hang');
    const signals: AbortSignal[] = [];
    const { events } = t.startWorker(
      (job) => {
        signals.push(job.signal);
        return new Promise(() => undefined);
      },
      { attemptTimeoutMs: 100 },
    );
    const { id } = await t.queue.add('x', {});
    const death = await events.waitFor('job:dead-lettered', (e) => e.jobId === id);
    expect(death.record).toMatchObject({ reason: 'max-attempts', attempts: 3 });
    expect(death.record.history.map((r) => r.classification)).toEqual([
      'timeout',
      'timeout',
      'timeout',
    ]);
    expect(signals.every((s) => s.aborted)).toBe(true);
  });

  it('a keyless add re-sent after a reconnect makes one job, not two', async () => {
    const server = await startRedisServer({ appendonly: false });
    onCleanup(() => server.kill());
    const redis = createRedis(server.url);
    const name = uniqueQueueName('resend');
    const queue = createQueue(name, { connection: redis });
    onCleanup(async () => {
      await queue.close();
      redis.disconnect();
    });
    await queue.bull.waitUntilReady();
    // Freeze Redis, send the add, cut the connection: the command reaches Redis
    // (it sits in its socket) and the client re-sends it after reconnecting.
    server.signal('SIGSTOP');
    const added = queue.add('x', { n: 1 });
    await new Promise((resolve) => setTimeout(resolve, 100));
    (redis as unknown as { stream: { destroy(): void } }).stream.destroy();
    server.signal('SIGCONT');
    const job = await added;
    expect(job.id).toMatch(/^[A-Za-z][-0-9A-Z_a-z]{17}$/); // the producer's own id (newJobId)
    const inspect = new Queue(name, { connection: createRedis(server.url) });
    onCleanup(() => inspect.close());
    expect(await inspect.getJobCounts('wait')).toEqual({ wait: 1 });
  });

  it('DLQ retention removes nothing without saying so: counted and logged with why', async () => {
    const t = setup('retention');
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const trims: { byAge: number; byCount: number }[] = [];
    const dlq = new DeadLetterQueue(t.name, {
      connection: redisUrl(),
      retention: { maxCount: 10 },
      logger: createLogger({ level: 'warn', destination: sink }),
      onTrim: (removed) => void trims.push(removed),
    });
    onCleanup(() => dlq.close());
    const now = Date.now();
    for (let i = 0; i < 12; i += 1)
      await seedDead(admin, {
        source: t.name,
        id: `d${i}`,
        name: 'job',
        data: {},
        opts: {},
        reason: 'permanent-error',
        message: 'x',
        attempts: 1,
        history: [],
        deadAt: now + i,
        replays: 0,
      });
    expect(await dlq.applyRetention()).toBe(2);
    expect(await dlq.count()).toBe(10);
    expect(trims).toEqual([{ byAge: 0, byCount: 2 }]);
    expect(lines.join('')).toMatch(
      /DLQ retention removed 2 dead job\(s\): 0 older than maxAgeMs, 2 beyond maxCount/,
    );
  });

  it('a worker applying DLQ retention reports what it removed in a metric', async () => {
    const t = setup('retention-metric');
    // A clock that moves 2 s per reading: every death is a second after the last,
    // so the worker applies the retention after each one.
    let now = Date.now();
    const clock = { now: () => (now += 2_000) };
    const { worker, events } = t.startWorker(
      async () => {
        throw new PermanentError('no');
      },
      // This clock jumps 2 s a reading: it is no clock to judge skew by (`maxClockSkewMs`).
      { retention: { maxCount: 2 }, clock, maxClockSkewMs: 3_600_000 },
    );
    const metrics = new RequeueMetrics();
    metrics.watch(worker);
    const trimmed: { byAge: number; byCount: number }[] = [];
    worker.on('dlq:trimmed', (e) => void trimmed.push({ byAge: e.byAge, byCount: e.byCount }));
    for (let i = 0; i < 3; i += 1) {
      await t.queue.add('x', { i });
      await events.waitForCount('job:dead-lettered', i + 1);
    }
    await expect.poll(() => trimmed.reduce((n, e) => n + e.byCount, 0)).toBe(1);
    expect(await t.dlq.count()).toBe(2);
    const { body } = await metrics.render();
    expect(body).toContain(
      `requeue_dlq_retention_removed_total{queue="${t.name}",reason="count"} 1`,
    );
  });
});
