import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Channel, ChannelModel } from 'amqplib';
import type { NatsConnection } from 'nats';
import { createLogger } from '../../src/config/logger.js';
import { PermanentError } from '../../src/errors/permanent-error.js';
import { DeadLetterQueue } from '../../src/scheduler/dlq/dead-letter-queue.js';
import { createQueue } from '../../src/scheduler/queue.js';
import {
  createAmqpConsumer,
  createAmqpRetryWorker,
  defaultAmqpRetryQueue,
  type BrokerMessage,
} from '../../workers/amqp/index.js';
import {
  createNatsConsumer,
  createNatsRetryWorker,
  defaultNatsRetryQueue,
} from '../../workers/nats/index.js';
import { amqpTestChannel, amqpUrl, publishAll, queueCounts } from '../harness/amqp.js';
import {
  consumerCounts,
  deleteStream,
  makeStream,
  natsTestConnection,
  natsUrl,
} from '../harness/nats.js';
import { cleanQueue, connect, redisUrl, uniqueQueueName } from '../harness/redis.js';

const logger = createLogger({ level: 'silent' });
const policy = { strategy: 'fixed', baseMs: 50, capMs: 50, maxAttempts: 3 } as const;
const durable = 'work';
const redis = connect();
let model: ChannelModel;
let channel: Channel;
let nc: NatsConnection;
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  ({ model, channel } = await amqpTestChannel());
  nc = await natsTestConnection();
});
afterEach(async () => {
  for (const clean of cleanups.splice(0).reverse()) await clean();
});
afterAll(async () => {
  await model.close();
  await nc.close();
  redis.disconnect();
});

async function waitFor(what: string, check: () => Promise<boolean> | boolean, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Waiting, delayed and active jobs of a retry queue: 0 once every retry was republished and confirmed. */
async function retryQueueLive(name: string): Promise<number> {
  const queue = createQueue(name, { connection: redis });
  try {
    const c = await queue.counts();
    return c.waiting + c.delayed + c.active + c.failed;
  } finally {
    await queue.close();
  }
}

interface Run {
  id: string;
  attempt: number;
  headers: Readonly<Record<string, string>>;
  pid: 'consumer' | 'worker';
}

/** A handler that records who ran which attempt (the consumer or the retry worker). */
function recorder(fails: (m: BrokerMessage) => boolean) {
  const runs: Run[] = [];
  const handlerFor = (pid: Run['pid']) => async (m: BrokerMessage) => {
    runs.push({ id: m.id, attempt: m.attempt, headers: m.headers, pid });
    if (fails(m)) throw new Error('dependency down');
  };
  return { runs, handlerFor };
}

describe('requeue/amqp republish', () => {
  async function setup(fails: (m: BrokerMessage) => boolean) {
    const queue = uniqueQueueName('amqp-republish');
    await channel.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
    const { runs, handlerFor } = recorder(fails);
    const worker = createAmqpRetryWorker({
      queue,
      handler: handlerFor('worker'),
      connection: redisUrl(),
      policy,
      logger,
      republish: { url: amqpUrl, exchange: '' },
    });
    const consumer = createAmqpConsumer({
      url: amqpUrl,
      queue,
      handler: handlerFor('consumer'),
      connection: redisUrl(),
      concurrency: 2,
      errorBackoffMs: 100,
      logger,
      policy,
      breaker: worker,
    });
    cleanups.push(async () => {
      await channel.deleteQueue(queue);
      await cleanQueue(redis, defaultAmqpRetryQueue(queue));
    });
    cleanups.push(() => worker.close({ timeoutMs: 2000 }));
    cleanups.push(() => consumer.close({ timeoutMs: 2000 }));
    await consumer.waitUntilReady();
    const dlq = new DeadLetterQueue(consumer.config.retryQueue, { connection: redis });
    return { queue, runs, consumer, dlq, retryQueue: consumer.config.retryQueue };
  }

  it('publishes a due retry back to the queue (confirmed) and the consumer runs it with its attempt; nothing unacked, the retry queue empty', async () => {
    let failed = false;
    const { queue, runs, consumer, retryQueue } = await setup(() => {
      if (failed) return false;
      failed = true;
      return true;
    });
    await publishAll(model, queue, [
      { body: Buffer.from('{"order":1}'), options: { messageId: 'o1' } },
    ]);
    await waitFor('the republished success', () => runs.length === 2);
    expect(runs.map((r) => [r.pid, r.attempt])).toEqual([
      ['consumer', 1],
      ['consumer', 2],
    ]);
    expect(runs[1]!.headers['x-requeue-attempt']).toBe('2');
    expect(runs[1]!.headers['x-requeue-retry-of']).toBe('id:o1');
    // The handler sees one id across the chain, to dedupe its side effects on.
    expect(runs.map((r) => r.id)).toEqual(['id:o1', 'id:o1']);
    await waitFor('an empty retry queue', async () => (await retryQueueLive(retryQueue)) === 0);
    await consumer.close({ timeoutMs: 2000 });
    // Nothing was left unacknowledged: closing the consumer returned nothing to the queue.
    expect((await queueCounts(channel, queue)).ready).toBe(0);
  });

  it('a republished retry that fails again is handed off under its own key (not the first message key) and counts against maxAttempts: dead after 3 runs', async () => {
    const { queue, runs, dlq } = await setup(() => true);
    await publishAll(model, queue, [
      { body: Buffer.from('{"order":2}'), options: { messageId: 'o2' } },
    ]);
    await waitFor('the dead letter', async () => (await dlq.list()).length === 1);
    expect(runs.map((r) => [r.pid, r.attempt])).toEqual([
      ['consumer', 1],
      ['consumer', 2],
      ['consumer', 3],
    ]);
    const [dead] = await dlq.list();
    expect(dead!.reason).toBe('max-attempts');
  });

  it('a DLQ replay is republished to the source queue and the consumer runs it', async () => {
    let fixed = false;
    const { queue, runs, dlq, retryQueue } = await setup((m) => {
      if (!fixed) throw new PermanentError('not yet');
      return m.body === 'never';
    });
    await publishAll(model, queue, [
      { body: Buffer.from('{"order":3}'), options: { messageId: 'o3' } },
    ]);
    await waitFor('the dead letter', async () => (await dlq.list()).length === 1);
    fixed = true;
    await dlq.replay({});
    await waitFor('the replayed run', () => runs.length === 2);
    expect(runs[1]).toMatchObject({ pid: 'consumer', attempt: 1 });
    expect(runs[1]!.headers['x-requeue-retry-of']).toBe('id:o3');
    expect(runs[1]!.headers['x-requeue-replays']).toBe('1');
    await waitFor('an empty DLQ', async () => (await dlq.list()).length === 0);
    await waitFor('an empty retry queue', async () => (await retryQueueLive(retryQueue)) === 0);
    expect((await queueCounts(channel, queue)).ready).toBe(0);
  });
});

describe('requeue/nats republish', () => {
  async function setup(fails: (m: BrokerMessage) => boolean) {
    const stream = uniqueQueueName('nats-republish').replace(/-/g, '_');
    await makeStream(nc, stream, durable, {});
    const { runs, handlerFor } = recorder(fails);
    const worker = createNatsRetryWorker({
      stream,
      consumer: durable,
      handler: handlerFor('worker'),
      connection: redisUrl(),
      policy,
      logger,
      republish: { servers: natsUrl },
    });
    const consumer = createNatsConsumer({
      servers: natsUrl,
      stream,
      consumer: durable,
      handler: handlerFor('consumer'),
      connection: redisUrl(),
      concurrency: 2,
      errorBackoffMs: 100,
      logger,
      policy,
      breaker: worker,
    });
    cleanups.push(async () => {
      await deleteStream(nc, stream);
      await cleanQueue(redis, defaultNatsRetryQueue(stream, durable));
    });
    cleanups.push(() => worker.close({ timeoutMs: 2000 }));
    cleanups.push(() => consumer.close({ timeoutMs: 2000 }));
    await consumer.waitUntilReady();
    const dlq = new DeadLetterQueue(consumer.config.retryQueue, { connection: redis });
    return { stream, runs, consumer, dlq, retryQueue: consumer.config.retryQueue };
  }

  it('publishes a due retry back to the stream (acked by JetStream) and the consumer runs it with its attempt; nothing unacked, the retry queue empty', async () => {
    let failed = false;
    const { stream, runs, retryQueue } = await setup(() => {
      if (failed) return false;
      failed = true;
      return true;
    });
    await nc.jetstream().publish(`${stream}.in`, Buffer.from('{"order":1}'), { msgID: 'n1' });
    await waitFor('the republished success', () => runs.length === 2);
    expect(runs.map((r) => [r.pid, r.attempt])).toEqual([
      ['consumer', 1],
      ['consumer', 2],
    ]);
    expect(runs[1]!.headers['x-requeue-attempt']).toBe('2');
    expect(runs[1]!.headers['x-requeue-retry-of']).toBe('id:n1');
    expect(runs.map((r) => r.id)).toEqual(['id:n1', 'id:n1']);
    await waitFor('an empty retry queue', async () => (await retryQueueLive(retryQueue)) === 0);
    await waitFor('nothing pending or unacked', async () => {
      const c = await consumerCounts(nc, stream, durable);
      return c.pending === 0 && c.ackPending === 0;
    });
  });

  it('a DLQ replay is republished to the source subject and the consumer runs it', async () => {
    let fixed = false;
    const { stream, runs, dlq, retryQueue } = await setup(() => {
      if (!fixed) throw new PermanentError('not yet');
      return false;
    });
    await nc.jetstream().publish(`${stream}.in`, Buffer.from('{"order":3}'), { msgID: 'n3' });
    await waitFor('the dead letter', async () => (await dlq.list()).length === 1);
    fixed = true;
    await dlq.replay({});
    await waitFor('the replayed run', () => runs.length === 2);
    expect(runs[1]).toMatchObject({ pid: 'consumer', attempt: 1 });
    expect(runs[1]!.headers['x-requeue-retry-of']).toBe('id:n3');
    await waitFor('an empty DLQ', async () => (await dlq.list()).length === 0);
    await waitFor('an empty retry queue', async () => (await retryQueueLive(retryQueue)) === 0);
    await waitFor('nothing pending or unacked', async () => {
      const c = await consumerCounts(nc, stream, durable);
      return c.pending === 0 && c.ackPending === 0;
    });
  });
});
