/** What the webhook tests share: a loopback server's lifetime, a queue with a webhook worker, a wait. */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Redis } from 'ioredis';
import { createLogger } from '../../src/config/logger.js';
import { createQueue } from '../../src/scheduler/queue.js';
import {
  createWebhookWorker,
  enqueueWebhook,
  type WebhookWorkerOptions,
} from '../../workers/webhook/index.js';
import { onCleanup } from './cleanup.js';
import { cleanQueue, redisUrl, uniqueQueueName } from './redis.js';

/** Listens on a free loopback port until the test's cleanup; answers the server's `http://127.0.0.1:<port>`. */
export async function listenOnLoopback(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onCleanup(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A fresh queue and a webhook worker on it (loopback allowed, silent), both closed and cleaned after the test. */
export function webhookTestQueue(admin: Redis, prefix: string, options: WebhookWorkerOptions = {}) {
  const name = uniqueQueueName(prefix);
  const queue = createQueue(name, { connection: redisUrl() });
  const worker = createWebhookWorker(name, {
    connection: redisUrl(),
    allowPrivate: true,
    logger: createLogger({ level: 'silent' }),
    // The library's quick retries (full jitter, 1–30 s): these tests time the 429
    // reaction, isolation and limits, not the webhook schedule (its first step is 5 s).
    policy: {},
    ...options,
  });
  onCleanup(async () => {
    await worker.close({ timeoutMs: 2_000 });
    await queue.close();
    await cleanQueue(admin, name);
  });
  const enqueue = (endpointId: string, url: string, eventId: string) =>
    enqueueWebhook(queue, {
      endpoint: { id: endpointId, url },
      event: { id: eventId, type: 'test', payload: { eventId } },
    });
  return { name, queue, worker, enqueue };
}

/** Waits until `check()` holds, checking every 50 ms; throws naming `what` after `timeoutMs`. */
export async function until(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
