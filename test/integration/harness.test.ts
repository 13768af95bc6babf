import { afterAll, describe, expect, it } from 'vitest';
import { Queue, Worker, QueueEvents } from 'bullmq';
import {
  cleanQueue,
  connect,
  redisUrl,
  startRedisServer,
  uniqueQueueName,
} from '../harness/redis.js';
import { Redis } from 'ioredis';
import { parseMonitorLine, writesDuring } from '../harness/monitor.js';
import { onCleanup } from '../harness/cleanup.js';

describe('the Redis harness', () => {
  const redis = connect();
  const name = uniqueQueueName('harness');

  afterAll(async () => {
    await cleanQueue(redis, name);
    redis.disconnect();
  });

  it('gives a Redis that answers and round-trips a BullMQ job', async () => {
    expect(await redis.ping()).toBe('PONG');
    const queue = new Queue(name, { connection: connect() });
    const events = new QueueEvents(name, { connection: connect() });
    await events.waitUntilReady();
    const worker = new Worker(name, async (job) => ({ echoed: job.data.n * 2 }), {
      connection: connect(),
    });
    const job = await queue.add('double', { n: 21 });
    const result = await job.waitUntilFinished(events, 10_000);
    expect(result).toEqual({ echoed: 42 });
    await worker.close();
    await events.close();
    await queue.close();
  });

  it('starts a private redis-server that can be killed and restarted with its AOF', async () => {
    const server = await startRedisServer({ appendonly: true });
    try {
      const client = new Redis(server.url, { maxRetriesPerRequest: null, lazyConnect: true });
      await client.connect();
      await client.set('k', 'v');
      // An fsync happens every second with appendfsync everysec; ask for one now.
      await client.call('BGREWRITEAOF');
      await waitFor(async () =>
        (await client.info('persistence')).includes('aof_rewrite_in_progress:0'),
      );
      client.disconnect();
      await server.kill();
      await server.restart();
      const again = new Redis(server.url);
      expect(await again.get('k')).toBe('v');
      again.disconnect();
    } finally {
      await server.stop();
    }
    expect(redisUrl()).toMatch(/^redis:\/\//);
  });
});

async function waitFor(check: () => Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('condition not met in time');
}

describe('the MONITOR harness', () => {
  it('reads a monitored command back as Redis received it', () => {
    expect(
      parseMonitorLine('+1795401610.747748 [0 127.0.0.1:47900] "incr" "requeue:{q}:dead-seq"'),
    ).toEqual(['incr', 'requeue:{q}:dead-seq']);
    expect(parseMonitorLine('+1.5 [0 lua] "hset" "k" "a \\"b\\" \\\\ \\x01\\n" ""')).toEqual([
      'hset',
      'k',
      'a "b" \\ \x01\n',
      '',
    ]);
    expect(parseMonitorLine('+OK')).toBeUndefined();
  });

  it('sees a write, sent directly or from inside a script, and not a read', async () => {
    const client = connect();
    onCleanup(() => client.disconnect());
    const name = uniqueQueueName('monitor');
    onCleanup(() => client.del(`${name}:a`, `${name}:b`).then(() => undefined));
    const writes = await writesDuring(client, name, async () => {
      await client.set(`${name}:a`, '1');
      await client.eval("return redis.call('set', KEYS[1], '2')", 1, `${name}:b`);
      await client.get(`${name}:a`);
    });
    expect(writes).toEqual([
      ['set', `${name}:a`, '1'],
      ['set', `${name}:b`, '2'],
    ]);
  });
});
