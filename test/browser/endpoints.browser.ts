import { mkdir } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import type { RedisClient } from '../../src/redis/connection.js';
import { EndpointRegistry } from '../../src/redis/endpoint-registry.js';
import { createQueue, type RequeueQueue } from '../../src/scheduler/queue.js';
import { parseServiceConfig } from '../../workers/service/config.js';
import { startService, type RunningService } from '../../workers/service/service.js';
import { createEndpoint } from '../../workers/webhook/endpoints.js';
import { sendMessage } from '../../workers/webhook/messages.js';
import { repoRoot } from '../harness/child.js';
import { openChromium, type OpenChromium } from '../harness/chromium.js';
import { cleanQueue, connect, redisUrl, uniqueQueueName } from '../harness/redis.js';

/**
 * Issue 24, items 2–6 in the dashboard, in Chromium, against the service's
 * real webhook worker and a loopback receiver: the endpoints view lists each
 * endpoint with its status, subscriptions and rate limit; an endpoint opens
 * to its recent deliveries, where a delivered one is resent and a scheduled
 * retry run now; the recover action previews its count, asks to confirm and
 * shows its progress. At 390 px nothing scrolls sideways. Screenshots:
 * docs/img/endpoints-1440.png and docs/img/endpoints-390.png.
 */

const token = 'browser-test-admin-token-endpoints-0123';
const hooks = uniqueQueueName('ui-endpoints');
let redis: RedisClient;
let service: RunningService;
let browser: OpenChromium | undefined;
let page: Page;
let receiver: Server;
let queue: RequeueQueue;
let registry: EndpointRegistry;
let downFails = true;
const hits: string[] = [];
const pageErrors: string[] = [];

async function admin(path: string) {
  const res = await fetch(`${service.url}/admin/queues/${hooks}${path}`, {
    headers: { authorization: `Bearer ${token}` },
  });
  return (await res.json()) as Record<string, unknown> & { entries?: { outcome: string }[] };
}

async function until<T>(what: string, read: () => Promise<T>, ok: (v: T) => boolean): Promise<T> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const value = await read();
    if (ok(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const outcomes = (endpoint: string) =>
  admin(`/deliveries?endpoint=${endpoint}`).then((d) => (d.entries ?? []).map((e) => e.outcome));

describe('the endpoints view in chromium', () => {
  beforeAll(async () => {
    redis = connect();
    receiver = createServer((req, res) => {
      req.resume();
      hits.push(`${req.url}`);
      if (req.url === '/down' && downFails) return void res.writeHead(400).end('bad');
      // /later fails its first attempt only: its retry waits an hour unless run now.
      if (req.url === '/later' && hits.filter((h) => h === '/later').length === 1)
        return void res.writeHead(503).end('busy');
      res.writeHead(200).end('thanks');
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
    const config = parseServiceConfig(
      {
        port: 0,
        redisUrl: redisUrl(),
        admin: { token },
        webhooks: {
          queue: hooks,
          allowPrivate: true,
          policy: { strategy: 'fixed', baseMs: 3_600_000, capMs: 3_600_000, maxAttempts: 3 },
        },
      },
      {},
    );
    service = await startService(config, createLogger({ level: 'silent' }));
    queue = createQueue(hooks, { connection: redis });
    registry = new EndpointRegistry({ connection: redis, cacheTtlMs: 0 });
    const allow = { allowPrivate: true };
    await createEndpoint(
      registry,
      hooks,
      'ep_acme',
      { url: `${base}/ok`, types: ['invoice.*'], rateLimit: { perSecond: 20, burst: 40 } },
      allow,
    );
    await createEndpoint(registry, hooks, 'ep_down', { url: `${base}/down` }, allow);
    await createEndpoint(
      registry,
      hooks,
      'ep_later',
      { url: `${base}/later`, types: ['invoice.paid'] },
      allow,
    );
    await sendMessage(
      queue,
      { type: 'invoice.paid', payload: { n: 1 }, id: 'msg_1' },
      { registry },
    );
    await until(
      'the first deliveries',
      () => outcomes('ep_down'),
      (o) => o.includes('dead'),
    );
    await until(
      'the retry',
      () => outcomes('ep_later'),
      (o) => o.includes('retrying'),
    );
    await until(
      'the delivery',
      () => outcomes('ep_acme'),
      (o) => o.includes('delivered'),
    );
    browser = await openChromium({ width: 1440, height: 1000 });
    page = browser.page;
    page.on('pageerror', (err) => pageErrors.push(err.message));
    await page.goto(`${service.url}/#q=${hooks}`);
    await page.getByTestId('token-prompt').waitFor();
    await page.locator('[data-testid=token-prompt] input').fill(token);
    await page.getByRole('button', { name: 'Use token' }).click();
    await page.getByTestId('endpoint-ep_acme').waitFor();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await service?.stop();
    await queue?.close();
    await registry?.close();
    await new Promise((resolve) => receiver.close(resolve));
    await cleanQueue(redis, hooks);
    redis?.disconnect();
  });

  it('lists endpoints with status, subscriptions and rate limit', async () => {
    const acme = await page.getByTestId('endpoint-ep_acme').innerText();
    expect(acme).toContain('enabled');
    expect(acme).toContain('invoice.*');
    expect(acme).toContain('20/s, burst 40');
    expect(await page.getByTestId('endpoint-ep_down').innerText()).toContain('all types');
  });

  it('resends a delivered message from its endpoint’s recent deliveries', async () => {
    await page.getByTestId('endpoint-open-ep_acme').click();
    const detail = page.getByTestId('endpoint-detail-ep_acme');
    await detail.getByTestId('resend').click();
    await page.getByTestId('confirm-yes').click();
    await expect
      .poll(() => page.getByTestId('notice').innerText())
      .toContain('resend 1 of msg_1 to ep_acme queued');
    await until(
      'the resend delivered',
      () => outcomes('ep_acme'),
      (o) => o.filter((x) => x === 'delivered').length === 2,
    );
    await page.getByTestId('endpoint-open-ep_acme').click();
  });

  it('runs a scheduled retry now', async () => {
    await page.getByTestId('endpoint-open-ep_later').click();
    await page.getByTestId('endpoint-detail-ep_later').getByTestId('retry-now').click();
    await page.getByTestId('confirm-yes').click();
    await until(
      'the retry delivered',
      () => outcomes('ep_later'),
      (o) => o.includes('delivered'),
    );
    await page.getByTestId('endpoint-open-ep_later').click();
  });

  it('previews a recovery’s count, confirms it and shows its progress; no sideways scroll at 390 px', async () => {
    downFails = false;
    await page.getByTestId('endpoint-open-ep_down').click();
    const recover = page.getByTestId('recover-ep_down');
    await recover.getByTestId('recover-preview').click();
    await expect.poll(() => recover.getByTestId('recover-count').innerText()).toContain('1 would');
    await mkdir(join(repoRoot, 'docs/img'), { recursive: true });
    await page.screenshot({ path: join(repoRoot, 'docs/img/endpoints-1440.png'), fullPage: true });
    await recover.getByTestId('recover-go').click();
    expect(await page.getByTestId('confirm').innerText()).toContain('Recover 1 dead deliveries');
    await page.getByTestId('confirm-yes').click();
    await expect
      .poll(() => recover.getByTestId('recover-progress').innerText(), { timeout: 20_000 })
      .toContain('recovered 1 of 1');
    await until(
      'the recovered delivery',
      () => outcomes('ep_down'),
      (o) => o.includes('delivered'),
    );

    await page.setViewportSize({ width: 390, height: 900 });
    await page.evaluate(
      () => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))),
    );
    const layout = await page.evaluate(() => ({
      scrollWidth: document.documentElement.scrollWidth,
      innerWidth: window.innerWidth,
    }));
    await page.screenshot({ path: join(repoRoot, 'docs/img/endpoints-390.png'), fullPage: true });
    expect(layout.scrollWidth).toBeLessThanOrEqual(layout.innerWidth);
    expect(pageErrors).toEqual([]);
  });
});
