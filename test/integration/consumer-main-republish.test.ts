/**
 * workers/consumer/main.ts with the republish environment: a message failing
 * once is republished to the broker (AMQP_REPUBLISH_EXCHANGE=amq.default: the
 * default exchange, back to the queue; REPUBLISH=true on NATS: the message's
 * own subject) and its retry runs in the consumer with `x-requeue-attempt`.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnTs } from '../harness/child.js';
import { amqpTestChannel, amqpUrl, publishAll } from '../harness/amqp.js';
import { deleteStream, makeStream, natsTestConnection, natsUrl } from '../harness/nats.js';
import { redisUrl } from '../harness/redis.js';

let admin: Redis;
beforeAll(() => {
  admin = new Redis(redisUrl(), { maxRetriesPerRequest: null });
});
afterAll(() => admin.disconnect());

async function runsOf(prefix: string, env: Record<string, string>): Promise<string[]> {
  const child = spawnTs('workers/consumer/main.ts', [], {
    ...env,
    REDIS_URL: redisUrl(),
    PREFIX: prefix,
    HANDLER: 'test/fixtures/broker-republish-handler.ts',
    POLICY: '{"strategy":"fixed","baseMs":50,"capMs":50,"maxAttempts":3}',
    SHUTDOWN_TIMEOUT_MS: '3000',
  });
  try {
    const started = Date.now();
    while ((await admin.llen(`${prefix}:runs`)) < 2) {
      if (Date.now() - started > 20_000) throw new Error(`no retry:\n${child.stderr()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(await child.kill('SIGTERM')).toEqual({ code: 0, signal: null });
    expect(child.stderr()).toBe('');
  } finally {
    await child.kill('SIGKILL');
  }
  const runs = await admin.lrange(`${prefix}:runs`, 0, -1);
  await admin.del(`${prefix}:runs`);
  return runs;
}

describe('workers/consumer/main.ts republish', () => {
  it('BROKER=amqp AMQP_REPUBLISH_EXCHANGE=amq.default: the retry is republished to the queue and run by the consumer', async () => {
    const queue = `main-republish-${randomUUID().slice(0, 8)}`;
    const { model, channel } = await amqpTestChannel();
    try {
      await channel.assertQueue(queue, { durable: true });
      await publishAll(model, queue, [{ body: Buffer.from('{"n":1}') }]);
      const runs = await runsOf(queue, {
        BROKER: 'amqp',
        AMQP_URL: amqpUrl,
        AMQP_QUEUE: queue,
        AMQP_REPUBLISH_EXCHANGE: 'amq.default',
      });
      expect(runs).toEqual(['1:', '2:2']);
      expect((await channel.checkQueue(queue)).messageCount).toBe(0);
    } finally {
      await channel.deleteQueue(queue).catch(() => undefined);
      await model.close();
    }
  }, 60_000);

  it('BROKER=nats REPUBLISH=true: the retry is republished to its subject and run by the consumer', async () => {
    const stream = `main_republish_${randomUUID().slice(0, 8)}`;
    const nc = await natsTestConnection();
    try {
      await makeStream(nc, stream, 'work');
      await nc.jetstream().publish(`${stream}.in`, Buffer.from('{"n":1}'));
      const runs = await runsOf(stream, {
        BROKER: 'nats',
        NATS_SERVERS: natsUrl,
        NATS_STREAM: stream,
        NATS_CONSUMER: 'work',
        REPUBLISH: 'true',
      });
      expect(runs).toEqual(['1:', '2:2']);
    } finally {
      await deleteStream(nc, stream);
      await nc.close();
    }
  }, 60_000);
});
