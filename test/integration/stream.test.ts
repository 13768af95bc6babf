import { spawn, type ChildProcess } from 'node:child_process';
import type { EventEmitter } from 'node:events';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createLogger } from '../../src/config/logger.js';
import { PermanentError } from '../../src/errors/permanent-error.js';
import { jobIdForKey } from '../../src/scheduler/job-id.js';
import { parseJobState } from '../../src/policy/job-state.js';
import { createQueue } from '../../src/scheduler/queue.js';
import {
  createStreamConsumer,
  createStreamRetryWorker,
  defaultRetryQueueName,
  retryIdempotencyKey,
  retryJobFor,
  type StreamMessage,
} from '../../workers/stream/index.js';
import { cleanQueue, connect, jobKey, redisUrl, uniqueQueueName } from '../harness/redis.js';

const logger = createLogger({ level: 'silent' });
const group = 'billing';
/** Short, exact delays: the fixed strategy waits `baseMs` every time. */
const policy = { strategy: 'fixed', baseMs: 100, capMs: 100, maxAttempts: 5 } as const;

const redis = connect();
const streams: string[] = [];
const closers: (() => Promise<unknown>)[] = [];
const children: ChildProcess[] = [];

/** A fresh stream, deleted after the test with its counters and retry queue. */
function newStream(): { stream: string; retryQueue: string } {
  const stream = uniqueQueueName('stream');
  streams.push(stream);
  return { stream, retryQueue: defaultRetryQueueName(stream, group) };
}

function track<T extends { close(options: { timeoutMs?: number }): Promise<void> }>(
  closable: T,
): T {
  closers.push(() => closable.close({ timeoutMs: 2000 }));
  return closable;
}

afterEach(async () => {
  for (const child of children.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
  for (const close of closers.splice(0).reverse()) await close();
  for (const stream of streams.splice(0)) {
    await redis.del(stream);
    // One hash of counters per stream: no KEYS, which a cluster answers per node.
    await redis.del(`${stream}:counts`);
    await cleanQueue(redis, defaultRetryQueueName(stream, group));
  }
});

afterAll(() => {
  redis.disconnect();
});

/** Polls `check` until it holds; fails naming `what` after `timeoutMs`. */
async function waitFor(what: string, check: () => Promise<boolean> | boolean, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** The next `event` from `emitter` whose payload passes `accept`. */
function nextEvent<T>(
  emitter: EventEmitter,
  event: string,
  accept: (payload: T) => boolean = () => true,
  timeoutMs = 10_000,
): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      emitter.off(event, on);
      reject(new Error(`timed out waiting for ${event}`));
    }, timeoutMs);
    function on(payload: T): void {
      if (!accept(payload)) return;
      clearTimeout(timer);
      emitter.off(event, on);
      resolve(payload);
    }
    emitter.on(event, on);
  });
}

/** Entries delivered to the group and not acknowledged (XPENDING's summary count). */
async function pendingCount(stream: string): Promise<number> {
  const [count] = (await redis.xpending(stream, group)) as [number, ...unknown[]];
  return count;
}

async function counter(stream: string, n: number): Promise<number> {
  return Number((await redis.hget(`${stream}:counts`, String(n))) ?? 0);
}

function spawnNode(args: string[], env: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', ...args], {
    env: { ...process.env, REDIS_URL: redisUrl(), ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  child.on('exit', (code, signal) => {
    if (code !== 0 && signal === null) console.error(`child ${args.join(' ')} failed:\n${stderr}`);
  });
  children.push(child);
  return child;
}

function exited(child: ChildProcess, timeoutMs = 10_000): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('child did not exit')), timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve(code);
    });
  });
}

describe('stream consumer recovery', () => {
  it('retries a message that fails twice after two delays and acknowledges it once', async () => {
    const { stream, retryQueue } = newStream();
    const runs: { attempt: number; deliveries: number; at: number }[] = [];
    let successes = 0;
    const handler = async (message: StreamMessage) => {
      runs.push({ attempt: message.attempt, deliveries: message.deliveries, at: Date.now() });
      if (runs.length <= 2) throw new Error(`flaky ${runs.length}`);
      successes += 1;
    };
    const consumer = track(
      createStreamConsumer({
        connection: redisUrl(),
        stream,
        group,
        handler,
        policy,
        startId: '0',
        blockMs: 100,
        logger,
      }),
    );
    const worker = track(
      createStreamRetryWorker({ connection: redisUrl(), stream, group, handler, policy, logger }),
    );
    const acked: string[] = [];
    consumer.on('messages:acked', ({ ids }) => acked.push(...ids));
    await Promise.all([consumer.waitUntilReady(), worker.waitUntilReady()]);

    const handedOff = nextEvent(consumer, 'message:handed-off');
    const completed = nextEvent(worker, 'job:completed');
    const id = await redis.xadd(stream, '*', 'n', '1');
    if (id === null) throw new Error('XADD returned no id');
    await handedOff;
    await waitFor('the hand-off to be acknowledged', () => acked.includes(id));
    // Acknowledged as soon as the retry job was stored: nothing is pending in the group.
    expect(await pendingCount(stream)).toBe(0);
    await completed;

    expect(successes).toBe(1);
    expect(runs.map((r) => r.attempt)).toEqual([1, 2, 3]);
    // Each retry waited at least the policy's delay (BullMQ promotes delayed jobs at ms precision).
    expect(runs[1]!.at - runs[0]!.at).toBeGreaterThanOrEqual(policy.baseMs - 1);
    expect(runs[2]!.at - runs[1]!.at).toBeGreaterThanOrEqual(policy.baseMs - 1);

    const jobId = jobIdForKey(retryIdempotencyKey(stream, group, id));
    const state = parseJobState(await redis.hget(jobKey(redis, retryQueue, jobId), 'rq'));
    const failed = state?.history.filter((r) => r.outcome === 'failed') ?? [];
    expect(failed.map((r) => r.attempt)).toEqual([1, 2]);
    expect(failed[0]?.details).toMatchObject({ phase: 'stream', deliveries: 1 });
    expect(failed[0]?.error?.message).toBe('flaky 1');
    for (const record of failed) {
      expect(record.decision).toBe('retry');
      expect(record.delayMs).toBeGreaterThanOrEqual(policy.baseMs);
    }

    // Acknowledged exactly once, never redelivered from the stream.
    expect(acked.filter((a) => a === id)).toHaveLength(1);
    expect(runs.filter((r) => r.attempt === 1)).toHaveLength(1);
    expect(await pendingCount(stream)).toBe(0);
  });

  it('loses no message when a consumer is killed with SIGKILL mid-batch', async () => {
    const { stream } = newStream();
    const total = 50;
    const hangOn = 20;
    await redis.xgroup('CREATE', stream, group, '0', 'MKSTREAM');
    const ids: string[] = [];
    for (let n = 1; n <= total; n += 1) ids.push((await redis.xadd(stream, '*', 'n', String(n)))!);

    const child = spawnNode(['test/fixtures/stream-consumer.ts'], {
      STREAM: stream,
      GROUP: group,
      CONSUMER: 'doomed',
      HANG_ON: String(hangOn),
      BATCH_SIZE: String(total),
    });
    await waitFor(
      'the child to hang on its entry',
      async () => (await counter(stream, hangOn)) >= 1,
      20_000,
    );
    // The entries before the hang are acknowledged as they finish, not at the batch's end.
    await waitFor(
      'the finished entries to be acknowledged',
      async () => (await pendingCount(stream)) === total - hangOn + 1,
    );
    child.kill('SIGKILL');
    await exited(child);

    const deliveries = new Map<string, number>();
    const rescuer = track(
      createStreamConsumer({
        connection: redisUrl(),
        stream,
        group,
        consumer: 'rescuer',
        claimIdleMs: 300,
        blockMs: 50,
        logger,
        handler: async (message) => {
          deliveries.set(message.id, message.deliveries);
          await redis.hincrby(`${stream}:counts`, String(message.fields.n), 1);
        },
      }),
    );
    const claimed: string[] = [];
    rescuer.on('messages:claimed', (event) => claimed.push(...event.ids));
    await waitFor('every entry to be acknowledged', async () => (await pendingCount(stream)) === 0);

    const counts: number[] = [];
    for (let n = 1; n <= total; n += 1) counts.push(await counter(stream, n));
    // None lost: every entry ran at least once.
    expect(counts.every((c) => c >= 1)).toBe(true);
    // The only duplicate is the entry in flight when the child died.
    const duplicates = counts.flatMap((c, i) => (c > 1 ? [i + 1] : []));
    expect(duplicates).toEqual([hangOn]);
    expect(counts[hangOn - 1]).toBe(2);
    expect(claimed.sort()).toEqual(ids.slice(hangOn - 1).sort());
    expect([...deliveries.values()].every((d) => d === 2)).toBe(true);
  });

  it('does not duplicate a retry job when the consumer crashed between hand-off and acknowledgement', async () => {
    const { stream, retryQueue } = newStream();
    await redis.xgroup('CREATE', stream, group, '0', 'MKSTREAM');
    const id = (await redis.xadd(stream, '*', 'n', '1'))!;
    // A consumer reads the entry, its handler fails, the retry job is stored — and it dies before XACK.
    await redis.call('XREADGROUP', 'GROUP', group, 'crashed', 'COUNT', 1, 'STREAMS', stream, '>');
    const job = retryJobFor({
      stream,
      group,
      id,
      fields: { n: '1' },
      streamAttempt: {
        consumer: 'crashed',
        deliveries: 1,
        failedAt: Date.now(),
        error: { class: 'Error', message: 'boom' },
      },
      policy,
    });
    const queue = createQueue(retryQueue, { connection: redisUrl() });
    closers.push(() => queue.close());
    await queue.add(job.name, job.data, job.opts);
    expect(await pendingCount(stream)).toBe(1);

    let runs = 0;
    const restarted = track(
      createStreamConsumer({
        connection: redisUrl(),
        stream,
        group,
        consumer: 'restarted',
        claimIdleMs: 200,
        blockMs: 50,
        policy,
        logger,
        handler: async () => {
          runs += 1;
          throw new Error('still failing');
        },
      }),
    );
    const already = await nextEvent<{ id: string; jobId: string }>(
      restarted,
      'message:already-handed-off',
    );
    expect(already.id).toBe(id);
    await waitFor(
      'the reclaimed entry to be acknowledged',
      async () => (await pendingCount(stream)) === 0,
    );

    // The reclaimed entry was not run again, and the retry queue holds one job for it.
    expect(runs).toBe(0);
    const counts = async () =>
      Object.values(await queue.bull.getJobCounts()).reduce((a, b) => a + b, 0);
    expect(await counts()).toBe(1);
    // A second hand-off of the same entry is removed by its idempotency key.
    await queue.add(job.name, job.data, job.opts);
    expect(await counts()).toBe(1);
    expect(already.jobId).toBe(jobIdForKey(retryIdempotencyKey(stream, group, id)));
  });

  it('dead-letters a message whose handler throws a PermanentError, with its stream id', async () => {
    const { stream } = newStream();
    let runs = 0;
    const handler = async () => {
      runs += 1;
      throw new PermanentError('unknown customer');
    };
    const consumer = track(
      createStreamConsumer({
        connection: redisUrl(),
        stream,
        group,
        handler,
        policy,
        startId: '0',
        blockMs: 100,
        logger,
      }),
    );
    const worker = track(
      createStreamRetryWorker({ connection: redisUrl(), stream, group, handler, policy, logger }),
    );
    await Promise.all([consumer.waitUntilReady(), worker.waitUntilReady()]);
    const dead = nextEvent<{
      record: {
        reason: string;
        data: unknown;
        opts: Record<string, unknown>;
        attempts: number;
        message: string;
      };
    }>(worker, 'job:dead-lettered');
    const id = (await redis.xadd(stream, '*', 'n', '1'))!;
    const { record } = await dead;

    expect(record.reason).toBe('permanent-error');
    expect(record.message).toBe('unknown customer');
    expect(record.attempts).toBe(1);
    expect(record.data).toMatchObject({ stream, group, id, fields: { n: '1' } });
    expect(record.opts).toMatchObject({ rq: { tags: { streamId: id, stream } } });
    // Requeue decided from the stream attempt's error: the handler did not run again.
    expect(runs).toBe(1);
    await waitFor('the entry to be acknowledged', async () => (await pendingCount(stream)) === 0);
    const jobId = jobIdForKey(retryIdempotencyKey(stream, group, id));
    expect((await worker.dlq.get(jobId))?.reason).toBe('permanent-error');
  });

  it('dead-letters a message whose fields fail the schema as invalid-payload, without running the handler', async () => {
    const { stream } = newStream();
    const schema = z.object({ amount: z.string().regex(/^\d+$/, 'must be digits') });
    let runs = 0;
    const handler = async () => {
      runs += 1;
    };
    const consumer = track(
      createStreamConsumer({
        connection: redisUrl(),
        stream,
        group,
        handler,
        schema,
        policy,
        startId: '0',
        blockMs: 100,
        logger,
      }),
    );
    const worker = track(
      createStreamRetryWorker({
        connection: redisUrl(),
        stream,
        group,
        handler,
        schema,
        policy,
        logger,
      }),
    );
    await Promise.all([consumer.waitUntilReady(), worker.waitUntilReady()]);
    const dead = nextEvent<{
      record: { reason: string; data: unknown; opts: Record<string, unknown>; message: string };
    }>(worker, 'job:dead-lettered');
    const id = (await redis.xadd(stream, '*', 'amount', 'twelve'))!;
    const { record } = await dead;

    expect(record.reason).toBe('invalid-payload');
    expect(record.message).toContain('fields.amount');
    expect(record.data).toMatchObject({ id, fields: { amount: 'twelve' } });
    expect(record.opts).toMatchObject({ rq: { tags: { streamId: id } } });
    expect(runs).toBe(0);
    await waitFor('the entry to be acknowledged', async () => (await pendingCount(stream)) === 0);
  });

  it("keeps a slow live consumer's entries from being reclaimed by another", async () => {
    const { stream } = newStream();
    await redis.xgroup('CREATE', stream, group, '0', 'MKSTREAM');
    for (let n = 1; n <= 4; n += 1) await redis.xadd(stream, '*', 'n', String(n));
    const ran: string[] = [];
    track(
      createStreamConsumer({
        connection: redisUrl(),
        stream,
        group,
        consumer: 'slow',
        claimIdleMs: 300,
        blockMs: 50,
        logger,
        handler: async (message) => {
          ran.push(`slow:${message.fields.n}`);
          // The batch takes about 4 × 200 ms, well past claimIdleMs.
          await new Promise((r) => setTimeout(r, 200));
        },
      }),
    );
    await waitFor('the slow consumer to start its batch', () => ran.length > 0);
    const other = track(
      createStreamConsumer({
        connection: redisUrl(),
        stream,
        group,
        consumer: 'other',
        claimIdleMs: 300,
        claimIntervalMs: 50,
        blockMs: 50,
        logger,
        handler: async (message) => {
          ran.push(`other:${message.fields.n}`);
        },
      }),
    );
    const claimed: string[] = [];
    other.on('messages:claimed', ({ ids }) => claimed.push(...ids));
    await waitFor('the batch to be acknowledged', async () => (await pendingCount(stream)) === 0);
    expect(ran).toEqual(['slow:1', 'slow:2', 'slow:3', 'slow:4']);
    expect(claimed).toEqual([]);
  });

  it('hands the unstarted entries of its batch back when closed, claimable at once', async () => {
    const { stream } = newStream();
    await redis.xgroup('CREATE', stream, group, '0', 'MKSTREAM');
    const ids: string[] = [];
    for (let n = 1; n <= 5; n += 1) ids.push((await redis.xadd(stream, '*', 'n', String(n)))!);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const ran: string[] = [];
    const first = createStreamConsumer({
      connection: redisUrl(),
      stream,
      group,
      consumer: 'first',
      claimIdleMs: 60_000,
      blockMs: 50,
      logger,
      handler: async (message) => {
        ran.push(message.id);
        await gate;
      },
    });
    await waitFor('the first entry to start', () => ran.length === 1);
    const closed = first.close({ timeoutMs: 5000 });
    release();
    await closed;
    // The entry in flight finished and was acknowledged; the other four are back, idle.
    expect(ran).toEqual([ids[0]]);
    const rows = (await redis.xpending(stream, group, '-', '+', 10)) as [
      string,
      string,
      number,
      number,
    ][];
    expect(rows.map(([id]) => id)).toEqual(ids.slice(1));
    for (const [, , idleMs, deliveries] of rows) {
      expect(idleMs).toBeGreaterThanOrEqual(60_000);
      // One less than delivered: the claim that takes it back counts the delivery again.
      expect(deliveries).toBe(0);
    }

    const seen = new Map<string, number>();
    track(
      createStreamConsumer({
        connection: redisUrl(),
        stream,
        group,
        consumer: 'second',
        claimIdleMs: 60_000,
        blockMs: 50,
        logger,
        handler: async (message) => {
          seen.set(message.id, message.deliveries);
        },
      }),
    );
    await waitFor(
      'the handed-back entries to be processed',
      async () => (await pendingCount(stream)) === 0,
    );
    // Reclaimed without waiting claimIdleMs, and counted as their first run.
    expect([...seen.keys()]).toEqual(ids.slice(1));
    expect([...seen.values()].every((d) => d === 1)).toBe(true);
  });

  it('hands an entry its consumers keep dying on to the retry worker without running it', async () => {
    const { stream } = newStream();
    await redis.xgroup('CREATE', stream, group, '0', 'MKSTREAM');
    const id = (await redis.xadd(stream, '*', 'n', '1'))!;
    await redis.call('XREADGROUP', 'GROUP', group, 'dead', 'COUNT', 1, 'STREAMS', stream, '>');
    // Three consumers died on it: the next claim makes four deliveries, above maxDeliveries.
    await redis.call(
      'XCLAIM',
      stream,
      group,
      'dead',
      0,
      id,
      'IDLE',
      10_000,
      'RETRYCOUNT',
      3,
      'JUSTID',
    );
    const attempts: number[] = [];
    const handler = async (message: StreamMessage) => {
      attempts.push(message.attempt);
    };
    const consumer = track(
      createStreamConsumer({
        connection: redisUrl(),
        stream,
        group,
        handler,
        policy,
        claimIdleMs: 1000,
        blockMs: 50,
        logger,
      }),
    );
    const worker = track(
      createStreamRetryWorker({ connection: redisUrl(), stream, group, handler, policy, logger }),
    );
    const handedOff = nextEvent<{ deliveries: number; error: { class: string } }>(
      consumer,
      'message:handed-off',
    );
    const completed = nextEvent(worker, 'job:completed');
    expect((await handedOff).deliveries).toBe(4);
    await completed;
    // The stream attempt is the crashed deliveries; requeue retried it once, after its delay.
    expect(attempts).toEqual([2]);
    expect(await pendingCount(stream)).toBe(0);
  });

  it('runs as a process (workers/stream/main.ts) that retries and drains on SIGTERM', async () => {
    const { stream } = newStream();
    const child = spawnNode(['workers/stream/main.ts'], {
      STREAM: stream,
      GROUP: group,
      HANDLER: 'test/fixtures/stream-counting-handler.ts',
      START_ID: '0',
      BLOCK_MS: '100',
      POLICY: JSON.stringify({ strategy: 'fixed', baseMs: 50, capMs: 50, maxAttempts: 3 }),
      LOG_LEVEL: 'warn',
    });
    for (let n = 1; n <= 5; n += 1) {
      await redis.xadd(stream, '*', 'n', String(n), 'fail', n === 3 ? '1' : '0');
    }
    const expected = [1, 1, 2, 1, 1];
    await waitFor(
      'every entry to be processed',
      async () => {
        for (let n = 1; n <= 5; n += 1)
          if ((await counter(stream, n)) < expected[n - 1]!) return false;
        return (await pendingCount(stream)) === 0;
      },
      20_000,
    );
    child.kill('SIGTERM');
    expect(await exited(child)).toBe(0);
    for (let n = 1; n <= 5; n += 1) expect(await counter(stream, n)).toBe(expected[n - 1]);
  });
});
