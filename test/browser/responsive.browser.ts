import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import type { RedisClient } from '../../src/redis/connection.js';
import { jobIdForKey } from '../../src/scheduler/job-id.js';
import { parseServiceConfig } from '../../workers/service/config.js';
import { startService, type RunningService } from '../../workers/service/service.js';
import { repoRoot } from '../harness/child.js';
import { openChromium, type OpenChromium } from '../harness/chromium.js';
import { seedDead } from '../harness/dlq.js';
import { cleanQueue, connect, redisUrl, uniqueQueueName } from '../harness/redis.js';

/**
 * Issue 25, item 7: the dashboard from 390 to 1920 px. At 390 px the page
 * was 729 px wide, at 800 px the DLQ's Replay/Purge were off the panel, at
 * 1440 px the endpoint buttons were clipped. At each width: the page does
 * not scroll sideways, and every button lies inside the viewport's width
 * (reachable without a sideways scroll). Screenshots go to docs/img/.
 */

const token = 'browser-test-admin-token-0123456789';
const widths = [390, 800, 1440] as const;

let redis: RedisClient;
let service: RunningService;
let browser: OpenChromium | undefined;
let page: Page;
const jobs = uniqueQueueName('ui-wide');
const hooks = uniqueQueueName('ui-wide-hooks');

describe('the dashboard at 390, 800 and 1440 px', () => {
  beforeAll(async () => {
    redis = connect();
    const config = parseServiceConfig(
      {
        port: 0,
        redisUrl: redisUrl(),
        admin: { token },
        webhooks: { queue: hooks },
        queues: [{ name: jobs, handler: 'examples/flaky-handler.mjs' }],
      },
      {},
    );
    service = await startService(config, createLogger({ level: 'silent' }));
    const now = Date.now();
    await seedDead(redis, {
      source: jobs,
      id: jobIdForKey('invoice:42'),
      idempotencyKey: 'invoice:42',
      name: 'charge-a-customer-with-a-rather-long-job-name',
      data: { invoice: 42 },
      opts: {},
      reason: 'max-attempts',
      message:
        'upstream answered 503: service unavailable while reaching https://billing.partner.example.com/v2/invoices/42/charge',
      attempts: 3,
      history: [],
      deadAt: now - 1000,
      replays: 0,
    });
    const res = await fetch(`${service.url}/admin/queues/${hooks}/breakers/open`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ key: 'ep_partner_with_a_long_endpoint_id' }),
    });
    expect(res.status).toBeLessThan(300);
    browser = await openChromium({ width: 1440, height: 1000 });
    page = browser.page;
    await page.goto(`${service.url}/#q=${jobs}`);
    await page.getByTestId('token-prompt').waitFor();
    await page.locator('[data-testid=token-prompt] input').fill(token);
    await page.getByRole('button', { name: 'Use token' }).click();
    await page.getByTestId(`queue-${jobs}`).waitFor();
    await page.getByTestId('dlq').getByRole('button', { name: 'Replay' }).first().waitFor();
  });

  afterAll(async () => {
    await browser?.close();
    await service?.stop();
    await cleanQueue(redis, jobs);
    await cleanQueue(redis, hooks);
    redis?.disconnect();
  });

  it.each(widths)(
    'at %i px: no sideways scroll, and every button within the width',
    async (width) => {
      await page.setViewportSize({ width, height: 900 });
      // Two frames: the layout has settled at the new width.
      await page.evaluate(
        () => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))),
      );
      const layout = await page.evaluate(() => ({
        scrollWidth: document.documentElement.scrollWidth,
        innerWidth: window.innerWidth,
        outside: Array.from(document.querySelectorAll('button, select, input'))
          .filter((el) => (el as HTMLElement).offsetParent !== null)
          .map((el) => ({ el, rect: el.getBoundingClientRect() }))
          .filter(({ rect }) => rect.left < -1 || rect.right > window.innerWidth + 1)
          .map(
            ({ el, rect }) =>
              `${el.tagName.toLowerCase()} "${(el.textContent ?? '').trim() || el.getAttribute('aria-label') || ''}" at ${Math.round(rect.left)}–${Math.round(rect.right)}`,
          ),
      }));
      await mkdir(join(repoRoot, 'docs/img'), { recursive: true });
      await page.screenshot({
        path: join(repoRoot, `docs/img/dashboard-${width}.png`),
        fullPage: true,
      });
      expect(layout.outside).toEqual([]);
      expect(layout.scrollWidth).toBeLessThanOrEqual(layout.innerWidth);
    },
  );

  it('an always-0 FAILED count and an Open button on a breaker no worker uses were shown: neither now', async () => {
    await page.setViewportSize({ width: 1440, height: 900 });
    const card = page.getByTestId(`queue-${jobs}`);
    await expect.poll(() => card.getByTestId('count-dead').innerText()).toContain('1');
    expect(await card.getByTestId('count-failed').count()).toBe(0);
    const breakers = page.locator('section.panel', { hasText: 'Circuit breakers' });
    await expect.poll(() => breakers.innerText()).toContain("not used by this queue's workers");
    expect(await breakers.getByRole('button').count()).toBe(0);
    // The webhook queue's workers use their breakers: there, the button acts and is shown.
    await page.getByTestId(`queue-${hooks}`).click();
    const row = page.getByTestId('breaker-ep_partner_with_a_long_endpoint_id');
    await row.waitFor();
    expect(await row.getByRole('button', { name: 'Close' }).count()).toBe(1);
  });
});
