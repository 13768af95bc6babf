import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Channel, ChannelModel } from 'amqplib';
import { z } from 'zod';
import { createLogger } from '../../src/config/logger.js';
import { PermanentError } from '../../src/errors/permanent-error.js';
import { queueBreakerKey } from '../../src/scheduler/requeue-worker.js';
import { DeadLetterQueue } from '../../src/scheduler/dlq/dead-letter-queue.js';
import {
  createAmqpConsumer,
  createAmqpRetryWorker,
  defaultAmqpRetryQueue,
  type BrokerMessage,
} from '../../workers/amqp/index.js';
import { brokerRetryJob, handOffKey } from '../../workers/consumer/broker-message.js';
import { readAmqpMessage } from '../../workers/amqp/read-message.js';
import { amqpTestChannel, amqpUrl, publishAll, queueCounts } from '../harness/amqp.js';
import { cleanQueue, connect, redisUrl, uniqueQueueName } from '../harness/redis.js';

const logger = createLogger({ level: 'silent' });
const policy = { strategy: 'fixed', baseMs: 50, capMs: 50, maxAttempts: 4 } as const;
const redis = connect();
let model: ChannelModel;
let channel: Channel;
const queues: string[] = [];
const closers: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  ({ model, channel } = await amqpTestChannel());
});
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
  for (const queue of queues.splice(0)) {
    await channel.deleteQueue(queue);
    await cleanQueue(redis, defaultAmqpRetryQueue(queue));
  }
});
afterAll(async () => {
  await model.close();
  redis.disconnect();
});

async function newQueue(type: 'classic' | 'quorum'): Promise<string> {
  const queue = uniqueQueueName(`amqp-${type}`);
  queues.push(queue);
  await channel.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': type } });
  return queue;
}

function start<B>(
  queue: string,
  handler: (m: BrokerMessage<B>) => Promise<void>,
  extra: { schema?: z.ZodType<B>; maxBodyBytes?: number; breaker?: object } = {},
) {
  const worker = createAmqpRetryWorker<B>({
    queue,
    handler,
    connection: redisUrl(),
    policy,
    logger,
    ...(extra.schema && { schema: extra.schema }),
    ...(extra.maxBodyBytes && { maxBodyBytes: extra.maxBodyBytes }),
    ...(extra.breaker && { breaker: extra.breaker }),
  });
  const consumer = createAmqpConsumer<B>({
    url: amqpUrl,
    queue,
    handler,
    connection: redisUrl(),
    concurrency: 4,
    errorBackoffMs: 100,
    logger,
    policy,
    breaker: worker,
    ...(extra.schema && { schema: extra.schema }),
    ...(extra.maxBodyBytes && { maxBodyBytes: extra.maxBodyBytes }),
  });
  closers.push(() => worker.close({ timeoutMs: 2000 }));
  closers.push(() => consumer.close({ timeoutMs: 2000 }));
  return {
    worker,
    consumer,
    dlq: new DeadLetterQueue(consumer.config.retryQueue, { connection: redis }),
  };
}

async function waitFor(what: string, check: () => Promise<boolean> | boolean, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe.each(['classic', 'quorum'] as const)('requeue/amqp on a %s queue', (type) => {
  it('acks successes, retries a transient failure through requeue, dead-letters a permanent one with its history', async () => {
    const queue = await newQueue(type);
    const runs = new Map<string, number[]>();
    const done = new Set<string>();
    const { consumer, dlq } = start<{ n: number; kind: string }>(queue, async (m) => {
      const n = String(m.body.n);
      runs.set(n, [...(runs.get(n) ?? []), m.attempt]);
      if (m.body.kind === 'flaky' && m.attempt < 3) throw new Error('ECONNRESET-ish');
      if (m.body.kind === 'bad') throw new PermanentError('bad order');
      done.add(n);
    });
    await consumer.waitUntilReady();
    const kinds = ['ok', 'ok', 'flaky', 'bad', 'ok'];
    await publishAll(
      model,
      queue,
      kinds.map((kind, n) => ({
        body: Buffer.from(JSON.stringify({ n, kind })),
        options: { messageId: `m${n}` },
      })),
    );
    await waitFor('the four good messages', () => done.size === 4);
    await waitFor('the dead one', async () => (await dlq.list()).length === 1);
    expect(runs.get('2')).toEqual([1, 2, 3]);
    expect(runs.get('3')).toEqual([1]);
    const [dead] = await dlq.list();
    expect(dead!.reason).toBe('permanent-error');
    expect(dead!.history[0]).toMatchObject({ details: { phase: 'broker', deliveries: 1 } });
    expect((dead!.data as { messageId: string }).messageId).toBe('m3');
    await waitFor(
      'an empty source queue',
      async () => (await queueCounts(channel, queue)).ready === 0,
    );
    await consumer.close({ timeoutMs: 2000 });
    // Nothing was left unacknowledged: closing the consumer returned nothing to the queue.
    expect((await queueCounts(channel, queue)).ready).toBe(0);
  });
});

describe('requeue/amqp dead letters', () => {
  it('publishes a dead message to the dead-letter exchange (confirmed) after the DLQ has it, and a DLQ replay re-runs the handler', async () => {
    const queue = await newQueue('classic');
    const parked = await newQueue('classic');
    const exchange = `${queue}.dlx`;
    await channel.assertExchange(exchange, 'fanout', { durable: false, autoDelete: true });
    await channel.bindQueue(parked, exchange, '');
    let fixed = false;
    const runs: number[] = [];
    const handler = async (m: BrokerMessage) => {
      runs.push(m.attempt);
      if (!fixed) throw new PermanentError('not yet');
    };
    const worker = createAmqpRetryWorker({
      queue,
      handler,
      connection: redisUrl(),
      policy,
      logger,
      deadLetterExchange: { url: amqpUrl, exchange },
    });
    const consumer = createAmqpConsumer({
      url: amqpUrl,
      queue,
      handler,
      connection: redisUrl(),
      logger,
      policy,
    });
    closers.push(() => worker.close({ timeoutMs: 2000 }));
    closers.push(() => consumer.close({ timeoutMs: 2000 }));
    await consumer.waitUntilReady();
    await publishAll(model, queue, [
      { body: Buffer.from('{"order":7}'), options: { messageId: 'o7' } },
    ]);
    await waitFor(
      'the dead letter on the exchange',
      async () => (await queueCounts(channel, parked)).ready === 1,
    );
    const got = await channel.get(parked, { noAck: true });
    if (got === false) throw new Error('no dead letter');
    expect(got.content.toString()).toBe('{"order":7}');
    expect(got.properties.headers?.['x-requeue-dead-reason']).toBe('permanent-error');
    expect(got.properties.messageId).toBe('o7');
    const dlq = new DeadLetterQueue(consumer.config.retryQueue, { connection: redis });
    fixed = true;
    const before = runs.length;
    await dlq.replay({});
    await waitFor('the replayed run', () => runs.length === before + 1);
    expect(runs.at(-1)).toBe(1);
    await waitFor('an empty DLQ', async () => (await dlq.list()).length === 0);
  });
});

describe('requeue/amqp bad input', () => {
  it('dead-letters an invalid body with its reason; binary bodies, missing properties, hostile headers and an oversized body do not crash it', async () => {
    const queue = await newQueue('classic');
    const seen: unknown[] = [];
    const { consumer, dlq } = start(queue, async (m) => void seen.push(m.body), {
      schema: z.object({ n: z.number() }),
      maxBodyBytes: 64 * 1024,
    });
    await consumer.waitUntilReady();
    await publishAll(model, queue, [
      { body: Buffer.from('{"n":1}') },
      { body: Buffer.from('{"n":"one"}'), options: { messageId: 'bad-schema' } },
      { body: Buffer.from([0xff, 0x00, 0xfe]), options: { messageId: 'binary' } },
      {
        body: Buffer.from('{"n":2}'),
        options: {
          headers: { __proto__: { x: 1 }, deep: { a: [1, { b: 2 }] }, big: 'v'.repeat(30_000) },
        },
      },
      { body: Buffer.alloc(200 * 1024, 1), options: { messageId: 'too-big' } },
    ]);
    await waitFor(
      'two good and three dead',
      async () => seen.length === 2 && (await dlq.list()).length === 3,
    );
    const dead = new Map(
      (await dlq.list()).map((r) => [(r.data as { messageId?: string }).messageId, r]),
    );
    expect(dead.get('bad-schema')!.reason).toBe('invalid-payload');
    expect(dead.get('bad-schema')!.message).toMatch(/body\.n/);
    expect(dead.get('binary')!.reason).toBe('invalid-payload');
    expect(dead.get('too-big')!.reason).toBe('invalid-payload');
    expect((dead.get('too-big')!.data as { body: string }).body).toBe('');
  });
});

describe('requeue/amqp redelivery and breaker', () => {
  it('a message redelivered after its hand-off was stored is acknowledged without a second hand-off or run', async () => {
    const queue = await newQueue('classic');
    await publishAll(model, queue, [
      { body: Buffer.from('{"x":1}'), options: { messageId: 'once' } },
    ]);
    // A consumer that stored the hand-off and died before its ack: take the message, add the job, do not ack.
    const dying = await model.createChannel();
    const got = await dying.get(queue, { noAck: false });
    if (got === false) throw new Error('no message');
    const read = readAmqpMessage(queue, got as never);
    const job = brokerRetryJob({
      read,
      maxBodyBytes: 1024,
      attempt: {
        consumer: 'dead',
        deliveries: 1,
        failedAt: Date.now(),
        error: { class: 'Error', message: 'boom' },
      },
    });
    let runs = 0;
    const { consumer, worker } = start(queue, async () => void (runs += 1));
    await worker.close({ timeoutMs: 2000 }); // keep the retry job waiting: this test looks at the consumer only
    await consumer.retryQueue.add(job.name, job.data, job.opts);
    await dying.close(); // the broker redelivers
    const already = new Promise((resolve) => consumer.once('message:already-handed-off', resolve));
    await consumer.waitUntilReady();
    expect(await already).toMatchObject({ id: 'id:once' });
    expect(runs).toBe(0);
    expect(job.opts.idempotencyKey).toBe(handOffKey('amqp', queue, 'id:once'));
    await waitFor('an empty queue', async () => (await queueCounts(channel, queue)).ready === 0);
  });

  it('while the breaker is open the consumer cancels its subscription and messages wait in the queue unharmed', async () => {
    const queue = await newQueue('quorum');
    let runs = 0;
    const { consumer, worker } = start(queue, async () => void (runs += 1), {
      breaker: { failureRate: 0.5, minimumRequests: 100, openMs: 60_000 },
    });
    await consumer.waitUntilReady();
    await worker.waitUntilReady();
    const paused = new Promise((r) => consumer.once('consumer:paused', r));
    await worker.gate.breakers!.forceOpen(queueBreakerKey, Date.now());
    await paused;
    await waitFor(
      'no consumer on the queue',
      async () => (await queueCounts(channel, queue)).consumers === 0,
    );
    await publishAll(model, queue, [{ body: Buffer.from('1') }, { body: Buffer.from('2') }]);
    await waitFor('both waiting', async () => (await queueCounts(channel, queue)).ready === 2);
    expect(runs).toBe(0);
    const resumed = new Promise((r) => consumer.once('consumer:resumed', r));
    await worker.gate.breakers!.forceClose(queueBreakerKey);
    await resumed;
    await waitFor('both run', () => runs === 2);
  });

  it('an unreachable broker rejects waitUntilReady naming it, without credentials', async () => {
    const consumer = createAmqpConsumer({
      url: 'amqp://user:secret@127.0.0.1:1',
      queue: 'nowhere',
      handler: async () => undefined,
      connection: redisUrl(),
      logger,
    });
    closers.push(() => consumer.close({ timeoutMs: 1000 }));
    const err = await consumer.waitUntilReady().then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(
      /cannot reach the AMQP broker at amqp:\/\/user:\*+@127\.0\.0\.1:1/,
    );
    expect(err?.message).not.toContain('secret');
  });

  it('a queue that does not exist rejects waitUntilReady naming it', async () => {
    const consumer = createAmqpConsumer({
      url: amqpUrl,
      queue: uniqueQueueName('missing'),
      handler: async () => undefined,
      connection: redisUrl(),
      logger,
    });
    closers.push(() => consumer.close({ timeoutMs: 1000 }));
    const err = await consumer.waitUntilReady().then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(/refused queue "missing-[0-9a-f]+".*NOT_FOUND/);
  });
});
