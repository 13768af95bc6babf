import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import type { RedisClient } from '../../src/redis/connection.js';
import { parseServiceConfig } from '../../workers/service/config.js';
import { startService, type RunningService } from '../../workers/service/service.js';
import { DeliveryLog } from '../../workers/webhook/delivery-log.js';
import { repoRoot } from '../harness/child.js';
import { cleanQueue, connect, redisUrl, uniqueQueueName } from '../harness/redis.js';

/**
 * Issue 24, item 6: a webhook queue's delivery log in the dashboard, in
 * Chromium: the attempts newest first, a TLS refusal badged, filtered by
 * status. Screenshot: test/browser/screenshots/10-delivery-log.png.
 */

const chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const token = 'browser-test-admin-token-dlog-0123456789';
const hooks = uniqueQueueName('ui-dlog');
let redis: RedisClient;
let service: RunningService;
let context: BrowserContext;
let profile: string;
let page: Page;
const pageErrors: string[] = [];

describe('the delivery log in chromium', () => {
  beforeAll(async () => {
    if (!existsSync(chromiumPath)) throw new Error(`${chromiumPath} not found`);
    redis = connect();
    const config = parseServiceConfig(
      { port: 0, redisUrl: redisUrl(), admin: { token }, webhooks: { queue: hooks } },
      {},
    );
    service = await startService(config, createLogger({ level: 'silent' }));
    profile = await mkdtemp(join(tmpdir(), 'requeue-chromium-'));
    context = await chromium.launchPersistentContext(profile, {
      executablePath: chromiumPath,
      headless: true,
      viewport: { width: 1440, height: 1000 },
      args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
    });
    page = context.pages()[0] ?? (await context.newPage());
    page.on('pageerror', (err) => pageErrors.push(err.message));
  });

  afterAll(async () => {
    await context?.close();
    if (profile) await rm(profile, { recursive: true, force: true });
    await service?.stop();
    await cleanQueue(redis, hooks);
    redis?.disconnect();
  });

  it('lists the attempts, badges a TLS refusal and filters by status', async () => {
    const log = new DeliveryLog(redis, hooks);
    const now = Date.now();
    const base = { eventType: 'invoice.paid', endpointId: 'ep_acme', latencyMs: 42 } as const;
    await log.write({
      ...base,
      at: now - 3_000,
      messageId: 'msg_1',
      jobId: 'j1',
      attempt: 1,
      outcome: 'retrying',
      status: 503,
      reason: 'http-status',
      excerpt: 'busy',
    });
    await log.write({
      ...base,
      at: now - 2_000,
      messageId: 'msg_2',
      jobId: 'j2',
      attempt: 1,
      outcome: 'retrying',
      code: 'CERT_HAS_EXPIRED',
      reason: 'tls-certificate',
      error: 'POST https://acme.example failed: certificate has expired',
    });
    await log.write({
      ...base,
      at: now - 1_000,
      messageId: 'msg_1',
      jobId: 'j1',
      attempt: 2,
      outcome: 'delivered',
      status: 200,
      excerpt: 'thanks',
    });

    await page.goto(`${service.url}/#q=${hooks}`);
    await page.getByTestId('token-prompt').waitFor();
    await page.locator('[data-testid=token-prompt] input').fill(token);
    await page.locator('[data-testid=token-prompt] input').press('Enter');
    const panel = page.getByTestId('delivery-log');
    await panel.getByTestId('log-msg_1-2').waitFor();
    const rows = await panel
      .locator('tbody tr')
      .evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-testid')));
    expect(rows).toEqual(['log-msg_1-2', 'log-msg_2-1', 'log-msg_1-1']);
    await expect
      .poll(() => panel.getByTestId('log-msg_2-1').textContent())
      .toContain('certificate CERT_HAS_EXPIRED');

    await panel.getByTestId('log-status').fill('none');
    await panel.getByTestId('log-status').press('Enter');
    await expect.poll(() => panel.locator('tbody tr').count(), { timeout: 10_000 }).toBe(1);
    await mkdir(join(repoRoot, 'test/browser/screenshots'), { recursive: true });
    await page.screenshot({
      path: join(repoRoot, 'test/browser/screenshots/10-delivery-log.png'),
      fullPage: true,
    });
    expect(pageErrors.filter((e) => !e.includes('401'))).toEqual([]);
  });
});
