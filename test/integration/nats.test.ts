import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { NatsConnection } from 'nats';
import { headers as natsHeaders } from 'nats';
import { z } from 'zod';
import { createLogger } from '../../src/config/logger.js';
import { PermanentError } from '../../src/errors/permanent-error.js';
import { queueBreakerKey } from '../../src/scheduler/requeue-worker.js';
import { DeadLetterQueue } from '../../src/scheduler/dlq/dead-letter-queue.js';
import {
  createNatsConsumer,
  createNatsRetryWorker,
  defaultNatsRetryQueue,
  type BrokerMessage,
} from '../../workers/nats/index.js';
import {
  consumerCounts,
  deleteStream,
  makeStream,
  natsTestConnection,
  natsUrl,
} from '../harness/nats.js';
import { cleanQueue, connect, redisUrl, uniqueQueueName } from '../harness/redis.js';

const logger = createLogger({ level: 'silent' });
const policy = { strategy: 'fixed', baseMs: 50, capMs: 50, maxAttempts: 4 } as const;
const durable = 'work';
const redis = connect();
let nc: NatsConnection;
const streams: string[] = [];
const closers: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  nc = await natsTestConnection();
});
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
  for (const stream of streams.splice(0)) {
    await deleteStream(nc, stream);
    await cleanQueue(redis, defaultNatsRetryQueue(stream, durable));
  }
});
afterAll(async () => {
  await nc.close();
  redis.disconnect();
});

async function newStream(
  options: { ackWaitMs?: number; maxDeliver?: number } = {},
): Promise<string> {
  const stream = uniqueQueueName('nats').replace(/-/g, '_');
  streams.push(stream);
  await makeStream(nc, stream, durable, options);
  return stream;
}

async function publish(stream: string, bodies: (string | Buffer)[], ids?: string[]): Promise<void> {
  const js = nc.jetstream();
  for (const [i, body] of bodies.entries())
    await js.publish(`${stream}.in`, typeof body === 'string' ? Buffer.from(body) : body, {
      ...(ids?.[i] !== undefined && { msgID: ids[i] }),
    });
}

function start<B>(
  stream: string,
  handler: (m: BrokerMessage<B>) => Promise<void>,
  extra: {
    failureMode?: 'nak' | 'hand-off';
    schema?: z.ZodType<B>;
    breaker?: object;
    workingIntervalMs?: number;
  } = {},
) {
  const worker = createNatsRetryWorker<B>({
    stream,
    consumer: durable,
    handler,
    connection: redisUrl(),
    policy,
    logger,
    ...(extra.schema && { schema: extra.schema }),
    ...(extra.breaker && { breaker: extra.breaker }),
  });
  const consumer = createNatsConsumer<B>({
    servers: natsUrl,
    stream,
    consumer: durable,
    handler,
    connection: redisUrl(),
    concurrency: 4,
    errorBackoffMs: 100,
    logger,
    policy,
    breaker: worker,
    ...(extra.failureMode && { failureMode: extra.failureMode }),
    ...(extra.schema && { schema: extra.schema }),
    ...(extra.workingIntervalMs && { workingIntervalMs: extra.workingIntervalMs }),
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

describe.each(['hand-off', 'nak'] as const)('requeue/nats in %s mode', (failureMode) => {
  it('acks successes, retries a transient failure, dead-letters a permanent one and terms it; nothing pending at the end', async () => {
    const stream = await newStream();
    const runs = new Map<number, number[]>();
    const done = new Set<number>();
    const { consumer, dlq } = start<{ n: number; kind: string }>(
      stream,
      async (m) => {
        const { n, kind } = m.body;
        runs.set(n, [...(runs.get(n) ?? []), m.attempt]);
        if (kind === 'flaky' && (runs.get(n)?.length ?? 0) < 3) throw new Error('flaky');
        if (kind === 'bad') throw new PermanentError('bad order');
        done.add(n);
      },
      { failureMode },
    );
    await consumer.waitUntilReady();
    const kinds = ['ok', 'flaky', 'bad', 'ok'];
    await publish(
      stream,
      kinds.map((kind, n) => JSON.stringify({ n, kind })),
      kinds.map((_, n) => `m${n}`),
    );
    await waitFor('three good', () => done.size === 3);
    await waitFor('one dead', async () => (await dlq.list()).length === 1);
    expect(runs.get(1)).toHaveLength(3);
    expect(runs.get(2)).toHaveLength(1);
    const [dead] = await dlq.list();
    expect(dead!.reason).toBe('permanent-error');
    expect((dead!.data as { messageId: string }).messageId).toBe('m2');
    await waitFor('nothing pending', async () => {
      const c = await consumerCounts(nc, stream, durable);
      return c.pending === 0 && c.ackPending === 0;
    });
  });
});

describe('requeue/nats nak mode and MaxDeliver', () => {
  it('a message failing past max_deliver is in the DLQ (max-attempts), not dropped unseen', async () => {
    const stream = await newStream({ maxDeliver: 2 });
    let runs = 0;
    const { consumer, dlq } = start(
      stream,
      async () => {
        runs += 1;
        throw new Error('always');
      },
      { failureMode: 'nak' },
    );
    await consumer.waitUntilReady();
    await publish(stream, ['{"x":1}'], ['doomed']);
    await waitFor('dead', async () => (await dlq.list()).length === 1);
    const [dead] = await dlq.list();
    expect(dead!.reason).toBe('max-attempts');
    expect(runs).toBe(2);
    await waitFor(
      'nothing pending',
      async () => (await consumerCounts(nc, stream, durable)).ackPending === 0,
    );
  });
});

describe('requeue/nats long handlers, bad input, breaker', () => {
  it('working() keeps a handler longer than ack_wait from being redelivered', async () => {
    const stream = await newStream({ ackWaitMs: 1000 });
    let runs = 0;
    const { consumer } = start(
      stream,
      async () => {
        runs += 1;
        await new Promise((r) => setTimeout(r, 2500));
      },
      { workingIntervalMs: 300 },
    );
    await consumer.waitUntilReady();
    const processed = new Promise((r) => consumer.once('message:processed', r));
    await publish(stream, ['slow']);
    await processed;
    expect(runs).toBe(1);
    expect((await consumerCounts(nc, stream, durable)).redelivered).toBe(0);
  });

  it('dead-letters an invalid body with its reason; binary bodies and hostile headers do not crash it', async () => {
    const stream = await newStream();
    const seen: unknown[] = [];
    const { consumer, dlq } = start(stream, async (m) => void seen.push(m.body), {
      schema: z.object({ n: z.number() }),
    });
    await consumer.waitUntilReady();
    await publish(
      stream,
      ['{"n":1}', '{"n":"x"}', Buffer.from([0xff, 0, 0xfe])],
      [undefined!, 'bad', 'bin'],
    );
    const h = natsHeaders();
    h.set('__proto__', 'x');
    h.set('X-Long', 'v'.repeat(20_000));
    await nc.jetstream().publish(`${stream}.in`, Buffer.from('{"n":2}'), { headers: h });
    await waitFor(
      'two good, two dead',
      async () => seen.length === 2 && (await dlq.list()).length === 2,
    );
    const dead = await dlq.list();
    expect(dead.map((d) => d.reason)).toEqual(['invalid-payload', 'invalid-payload']);
  });

  it('while the breaker is open nothing is pulled; it resumes when it closes', async () => {
    const stream = await newStream();
    let runs = 0;
    const { consumer, worker } = start(stream, async () => void (runs += 1), {
      breaker: { failureRate: 0.5, minimumRequests: 100, openMs: 60_000 },
    });
    await consumer.waitUntilReady();
    await worker.waitUntilReady();
    const paused = new Promise((r) => consumer.once('consumer:paused', r));
    await worker.gate.breakers!.forceOpen(queueBreakerKey, Date.now());
    await paused;
    await publish(stream, ['1', '2']);
    await new Promise((r) => setTimeout(r, 1500)); // a pull would have taken them by now
    expect(runs).toBe(0);
    await worker.gate.breakers!.forceClose(queueBreakerKey);
    await waitFor('both run', () => runs === 2);
  });

  it('an unreachable NATS rejects waitUntilReady naming it', async () => {
    const consumer = createNatsConsumer({
      servers: 'nats://127.0.0.1:1',
      stream: 's',
      consumer: 'c',
      handler: async () => undefined,
      connection: redisUrl(),
      logger,
      connectTimeoutMs: 1000,
    });
    closers.push(() => consumer.close({ timeoutMs: 1000 }));
    const err = await consumer.waitUntilReady().then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(/cannot reach NATS at nats:\/\/127\.0\.0\.1:1/);
  });

  it('a stream or durable that does not exist rejects waitUntilReady naming them', async () => {
    const consumer = createNatsConsumer({
      servers: natsUrl,
      stream: 'no_such_stream',
      consumer: 'nobody',
      handler: async () => undefined,
      connection: redisUrl(),
      logger,
    });
    closers.push(() => consumer.close({ timeoutMs: 1000 }));
    const err = await consumer.waitUntilReady().then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(/no JetStream consumer "nobody" on stream "no_such_stream"/);
  });
});
