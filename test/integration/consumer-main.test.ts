/**
 * The standalone broker-consumer process (workers/consumer/main.ts), against
 * the machine's RabbitMQ and NATS: it starts from its environment, serves
 * /metrics, and SIGTERM with work in flight (one handler that never ends)
 * ends it within SHUTDOWN_TIMEOUT_MS, exit code 0, losing nothing: every
 * message was handled or is back in (or still held by) the broker. A handler
 * still running at the deadline (its signal aborted, ignored here) may finish
 * after its connection closed: handled and redelivered (at least once), so
 * handled + left may exceed the count by the other 3 slots, never fall short.
 */
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnTs, type TsChild } from '../harness/child.js';
import { amqpTestChannel, publishAll } from '../harness/amqp.js';
import {
  consumerCounts,
  deleteStream,
  makeStream,
  natsTestConnection,
  natsUrl,
} from '../harness/nats.js';
import { amqpUrl } from '../harness/amqp.js';
import { redisUrl } from '../harness/redis.js';

const SHUTDOWN_TIMEOUT_MS = 3_000;
const COUNT = 12;

let admin: Redis;
beforeAll(() => {
  admin = new Redis(redisUrl(), { maxRetriesPerRequest: null });
});
afterAll(() => admin.disconnect());

async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  server.close();
  return port;
}

async function until(
  check: () => Promise<boolean>,
  what: string,
  timeoutMs = 20_000,
): Promise<void> {
  const started = Date.now();
  while (!(await check())) {
    if (Date.now() - started > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Starts the process, checks /metrics, lets work start, SIGTERMs it; returns what it handled. */
async function runAndTerminate(prefix: string, env: Record<string, string>): Promise<Set<number>> {
  const port = await freePort();
  const child: TsChild = spawnTs('workers/consumer/main.ts', [], {
    ...env,
    REDIS_URL: redisUrl(),
    PREFIX: prefix,
    HANDLER: 'test/fixtures/broker-slow-handler.ts',
    CONCURRENCY: '4',
    SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS),
    METRICS_PORT: String(port),
    LOG_LEVEL: 'info',
  });
  try {
    await until(
      async () => child.stdout().includes('consumer started'),
      `start:\n${child.stderr()}`,
    );
    const metrics = await fetch(`http://127.0.0.1:${port}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain('requeue_');
    await until(async () => (await admin.scard(`${prefix}:done`)) >= 2, 'two messages handled');
    const sentAt = Date.now();
    const exit = await child.kill('SIGTERM');
    const tookMs = Date.now() - sentAt;
    expect(exit).toEqual({ code: 0, signal: null });
    // The timeout, plus a process exit's own time on a loaded machine.
    expect(tookMs).toBeLessThan(SHUTDOWN_TIMEOUT_MS + 2_000);
    expect(child.stderr()).toBe('');
  } finally {
    await child.kill('SIGKILL');
  }
  const done = new Set((await admin.smembers(`${prefix}:done`)).map(Number));
  await admin.del(`${prefix}:done`);
  return done;
}

const bodies = Array.from({ length: COUNT }, (_, n) => ({
  body: Buffer.from(JSON.stringify({ n })),
}));

describe('workers/consumer/main.ts', () => {
  it('BROKER=amqp: SIGTERM with a handler that never ends exits within SHUTDOWN_TIMEOUT_MS and loses nothing', async () => {
    const queue = `main-amqp-${randomUUID().slice(0, 8)}`;
    const { model, channel } = await amqpTestChannel();
    try {
      await channel.assertQueue(queue, { durable: true });
      await publishAll(model, queue, bodies);
      const done = await runAndTerminate(queue, {
        BROKER: 'amqp',
        AMQP_URL: amqpUrl,
        AMQP_QUEUE: queue,
      });
      expect(done.has(0)).toBe(false);
      // What was not handled is back in the queue: message 0 and any not yet taken.
      const left = await channel.checkQueue(queue);
      expect(done.size + left.messageCount).toBeGreaterThanOrEqual(COUNT);
      expect(done.size + left.messageCount).toBeLessThanOrEqual(COUNT + 3);
    } finally {
      await channel.deleteQueue(queue).catch(() => undefined);
      await model.close();
    }
  }, 60_000);

  it('BROKER=nats: SIGTERM with a handler that never ends exits within SHUTDOWN_TIMEOUT_MS and loses nothing', async () => {
    const stream = `main_nats_${randomUUID().slice(0, 8)}`;
    const nc = await natsTestConnection();
    try {
      await makeStream(nc, stream, 'work');
      const js = nc.jetstream();
      for (const b of bodies) await js.publish(`${stream}.in`, b.body);
      const done = await runAndTerminate(stream, {
        BROKER: 'nats',
        NATS_SERVERS: natsUrl,
        NATS_STREAM: stream,
        NATS_CONSUMER: 'work',
      });
      expect(done.has(0)).toBe(false);
      // Not acked: still pending, or delivered and redelivered after ack_wait.
      const left = await consumerCounts(nc, stream, 'work');
      expect(done.size + left.pending + left.ackPending).toBeGreaterThanOrEqual(COUNT);
      expect(done.size + left.pending + left.ackPending).toBeLessThanOrEqual(COUNT + 3);
    } finally {
      await deleteStream(nc, stream);
      await nc.close();
    }
  }, 60_000);

  it('a missing setting of the chosen broker is one line naming it, exit code 2', async () => {
    const child = spawnTs('workers/consumer/main.ts', [], {
      REDIS_URL: redisUrl(),
      BROKER: 'nats',
      NATS_SERVERS: natsUrl,
      HANDLER: 'test/fixtures/broker-slow-handler.ts',
    });
    const exit = await child.exited;
    expect(exit.code).toBe(2);
    expect(child.stderr().trim()).toBe(
      'requeue-consumer: env.NATS_STREAM: required with BROKER=nats',
    );
  }, 30_000);
});
