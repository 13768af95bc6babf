/**
 * Issue 26, item 3: the service shows broker consumers' retry queues
 * (`consumers` in its config) as it shows its own: a queue card with the
 * kind `amqp` / `nats` and the source's name, the counts (a dead message
 * among them), `/admin/queues` with `kind` and `source`, and the queue's
 * gauges on `/metrics`. No worker runs on them in the service. Screenshot to
 * test/browser/screenshots/.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import type { RedisClient } from '../../src/redis/connection.js';
import { defaultAmqpRetryQueue } from '../../workers/amqp/index.js';
import { defaultNatsRetryQueue } from '../../workers/nats/index.js';
import { parseServiceConfig } from '../../workers/service/config.js';
import { startService, type RunningService } from '../../workers/service/service.js';
import { repoRoot } from '../harness/child.js';
import { openChromium, type OpenChromium } from '../harness/chromium.js';
import { seedDead } from '../harness/dlq.js';
import { cleanQueue, connect, redisUrl, uniqueQueueName } from '../harness/redis.js';

const token = 'browser-consumers-admin-token-0123456789';
const amqpQueue = uniqueQueueName('orders');
const natsStream = uniqueQueueName('EVENTS').replace(/[^A-Za-z0-9_]/g, '_');
const amqpRetry = defaultAmqpRetryQueue(amqpQueue);
const natsRetry = defaultNatsRetryQueue(natsStream, 'billing');

let redis: RedisClient;
let service: RunningService;
let browser: OpenChromium | undefined;
let page: Page;
const pageErrors: string[] = [];

describe('broker consumers in the dashboard', () => {
  beforeAll(async () => {
    redis = connect();
    const config = parseServiceConfig(
      {
        port: 0,
        redisUrl: redisUrl(),
        admin: { token },
        webhooks: { enabled: false },
        consumers: [
          { broker: 'amqp', queue: amqpQueue },
          { broker: 'nats', stream: natsStream, consumer: 'billing' },
        ],
      },
      {},
    );
    service = await startService(config, createLogger({ level: 'silent' }));
    browser = await openChromium({ width: 1440, height: 900 });
    page = browser.page;
    page.on('pageerror', (err) => pageErrors.push(err.message));
  });

  afterAll(async () => {
    await browser?.close();
    await service?.stop();
    await cleanQueue(redis, amqpRetry);
    await cleanQueue(redis, natsRetry);
    redis?.disconnect();
  });

  it('shows each consumer retry queue with its kind, its source and its dead messages', async () => {
    await seedDead(redis, {
      source: amqpRetry,
      id: 'm-1',
      name: 'broker-message',
      data: { broker: 'amqp', source: amqpQueue, id: 'm-1', body: '' },
      opts: {},
      reason: 'permanent-error',
      message: 'message 1 is bad',
      attempts: 1,
      history: [],
      deadAt: Date.now() - 1000,
      replays: 0,
    });
    const res = await fetch(`${service.url}/admin/queues`, {
      headers: { authorization: `Bearer ${token}` },
    });
    const { queues } = (await res.json()) as {
      queues: { name: string; kind: string; source: string | null; counts: { dead: number } }[];
    };
    expect(queues.map(({ name, kind, source }) => ({ name, kind, source }))).toEqual([
      { name: amqpRetry, kind: 'amqp', source: amqpQueue },
      { name: natsRetry, kind: 'nats', source: `${natsStream}/billing` },
    ]);
    expect(queues[0]!.counts.dead).toBe(1);
    const metrics = await (await fetch(`${service.url}/metrics`)).text();
    expect(metrics).toContain(`queue="${amqpRetry}"`);

    await page.goto(service.url);
    await page.locator('[data-testid=token-prompt] input').fill(token);
    await page.getByRole('button', { name: 'Use token' }).click();
    const amqpCard = page.getByTestId(`queue-${amqpRetry}`);
    await expect.poll(() => amqpCard.getByTestId('count-dead').innerText()).toContain('1');
    expect(await amqpCard.locator('h2').innerText()).toContain('amqp');
    expect(await amqpCard.getByTestId('queue-source').innerText()).toBe(
      `retries of queue ${amqpQueue}`,
    );
    const natsCard = page.getByTestId(`queue-${natsRetry}`);
    expect(await natsCard.locator('h2').innerText()).toContain('nats');
    expect(await natsCard.getByTestId('queue-source').innerText()).toBe(
      `retries of stream/consumer ${natsStream}/billing`,
    );
    const dir = join(repoRoot, 'test/browser/screenshots');
    await mkdir(dir, { recursive: true });
    await page.screenshot({ path: join(dir, 'consumers-queue-cards.png') });
    expect(pageErrors).toEqual([]);
  });
});
