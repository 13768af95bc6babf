/**
 * `connection` as BullMQ users write it: ioredis options (`{ host, port }`).
 * It used to reach requeue's own Redis calls as a plain object: the worker
 * died of an unhandled `TypeError: redis.info is not a function`.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { DeadLetterQueue, PermanentError, createQueue, createWorker } from '../../src/index.js';
import { createLogger } from '../../src/config/logger.js';
import { onCleanup } from '../harness/cleanup.js';
import { cleanQueue, connect, redisUrl, uniqueQueueName } from '../harness/redis.js';

const logger = createLogger({ level: 'silent' });
const admin = connect();
afterAll(() => admin.disconnect());

function optionsFromUrl(url: string): { host: string; port: number; db?: number } {
  const parsed = new URL(url);
  const db = parsed.pathname.replace('/', '');
  return {
    host: parsed.hostname,
    port: Number(parsed.port || 6379),
    ...(db ? { db: Number(db) } : {}),
  };
}

describe('connection given as ioredis options', () => {
  it('a worker given { host, port } runs and dead-letters', async () => {
    const name = uniqueQueueName('conn-options');
    const connection = optionsFromUrl(redisUrl());
    const queue = createQueue(name, { connection });
    const dlq = new DeadLetterQueue(name, { connection });
    const worker = createWorker<{ ok: boolean }>(
      name,
      async (job) => {
        if (!job.data.ok) throw new PermanentError('no');
        return 'done';
      },
      { connection, logger },
    );
    onCleanup(async () => {
      await cleanQueue(admin, name);
    });
    const completed = new Promise((resolve) => worker.on('job:completed', resolve));
    const dead = new Promise((resolve) => worker.on('job:dead-lettered', resolve));
    await queue.add('x', { ok: true });
    const doomed = await queue.add('x', { ok: false });
    await completed;
    await dead;
    expect((await dlq.get(doomed.id))?.reason).toBe('permanent-error');
    await worker.close({ timeoutMs: 5_000 });
    await dlq.close();
    await queue.close();
  }, 20_000);

  it.each([
    ['a number', 42],
    ['null', null],
    ['an array', ['redis://x']],
  ])('connection as %s: one line naming connection', (_label, connection) => {
    expect(() =>
      createWorker('x', async () => undefined, {
        connection: connection as never,
        logger,
      }),
    ).toThrow(/^connection must be a Redis URL, ioredis options/);
  });
});
