import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { PermanentError } from '../../src/errors/permanent-error.js';
import { jobIdForKey } from '../../src/scheduler/job-id.js';
import {
  createStreamConsumer,
  createStreamRetryWorker,
  retryIdempotencyKey,
  type StreamMessage,
} from '../../workers/stream/index.js';
import { redisUrl } from '../harness/redis.js';
import {
  cleanUpStreams,
  logger,
  group,
  policy,
  redis,
  newStream,
  track,
  waitFor,
  nextEvent,
  pendingCount,
} from './stream-helpers.js';

/**
 * Stream consumer recovery, continued: dead-letters (a PermanentError, a bad
 * payload) and the entries between consumers: a slow live one's kept, a closing
 * one's handed back, one its consumers keep dying on handed to the retry worker
 * (retries, SIGKILL and the process are in `stream.test.ts`).
 */

cleanUpStreams();

describe('stream consumer recovery', () => {
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
});
