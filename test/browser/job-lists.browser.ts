import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import type { RedisClient } from '../../src/redis/connection.js';
import { requeueKeys } from '../../src/redis/keys.js';
import { jobIdForKey } from '../../src/scheduler/job-id.js';
import { parseServiceConfig } from '../../workers/service/config.js';
import { startService, type RunningService } from '../../workers/service/service.js';
import { repoRoot } from '../harness/child.js';
import { openChromium, type OpenChromium } from '../harness/chromium.js';
import { seedDead } from '../harness/dlq.js';
import {
  bullPrefixOf,
  cleanQueue,
  connect,
  jobKey,
  redisUrl,
  uniqueQueueName,
} from '../harness/redis.js';

/**
 * Issue 25, item 7, against Sidekiq's Web UI and bull-board: the job lists
 * (waiting, active, delayed, completed) with pages and the job view;
 * retry-now and delete of a scheduled retry, checked in Redis; pause and
 * resume; bulk select and replay in the DLQ; the DLQ's text search; and no
 * page scrolling sideways at 390, 800 and 1440 px. Screenshots to docs/img/.
 */

const token = 'browser-lists-admin-token-0123456789';
const retryDelayMs = 600_000;

let redis: RedisClient;
let service: RunningService;
let browser: OpenChromium | undefined;
let page: Page;
const jobs = uniqueQueueName('ui-lists');
const hooks = uniqueQueueName('ui-lists-hooks');
const pageErrors: string[] = [];
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON under test, checked by expect()
type Json = any;

async function admin(path: string, init: RequestInit = {}): Promise<Json> {
  const res = await fetch(`${service.url}/admin${path}`, {
    ...init,
    headers: {
      authorization: `Bearer ${token}`,
      ...(init.body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
  });
  expect(res.status, `${path}: ${res.status}`).toBeLessThan(300);
  return res.json();
}

async function intake(key: string, data: unknown, delayMs?: number): Promise<void> {
  const res = await fetch(`${service.url}/v1/jobs/${jobs}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      name: 'sync',
      data,
      idempotencyKey: key,
      ...(delayMs ? { delayMs } : {}),
    }),
  });
  expect(res.status, await res.text()).toBeLessThan(300);
}

async function until<T>(what: string, read: () => Promise<T>, done: (v: T) => boolean): Promise<T> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const bull = (suffix: string) => `${bullPrefixOf(redis, jobs)}:${jobs}:${suffix}`;
const confirm = async () => {
  await page.getByTestId('confirm-yes').click();
  await page.getByTestId('confirm').waitFor({ state: 'detached' });
};

describe('job lists, job view and actions in chromium', () => {
  beforeAll(async () => {
    redis = connect();
    const config = parseServiceConfig(
      {
        port: 0,
        redisUrl: redisUrl(),
        admin: { token },
        webhooks: { queue: hooks },
        queues: [
          {
            name: jobs,
            handler: 'examples/flaky-handler.mjs',
            policy: {
              strategy: 'fixed',
              baseMs: retryDelayMs,
              capMs: retryDelayMs,
              maxAttempts: 5,
            },
          },
        ],
      },
      {},
    );
    service = await startService(config, createLogger({ level: 'silent' }));
    // A completed job and a scheduled retry, made by the service's own worker.
    await intake('done:1', {});
    await intake('retry:1', { fail: 'transient', times: 3, apiKey: 'sk_live_never_shown' });
    await until(
      'a completion and a retry',
      () => admin(`/queues/${jobs}`),
      (q) => q.counts.completed === 1 && q.counts.delayed === 1,
    );
    // Paused, so that the waiting jobs stay waiting; one job added with a delay.
    await admin(`/queues/${jobs}/pause`, { method: 'POST' });
    for (let i = 0; i < 12; i += 1) await intake(`wait:${String(i).padStart(2, '0')}`, { i });
    await intake('later:1', { n: 1 }, 3_600_000);
    await intake('later:2', { n: 2 }, 7_200_000);
    const now = Date.now();
    for (const [id, message, order] of [
      ['d1', 'connect ETIMEDOUT 10.1.2.3:443', 'A-1'],
      ['d2', 'upstream answered 500', 'B-2'],
      ['d3', 'upstream answered 502', 'C-3'],
    ] as const)
      await seedDead(redis, {
        source: jobs,
        id: jobIdForKey(`dead:${id}`),
        idempotencyKey: `dead:${id}`,
        name: 'sync',
        data: { order },
        opts: {},
        reason: 'max-attempts',
        message,
        attempts: 5,
        history: [],
        deadAt: now - 1000,
        replays: 0,
      });

    browser = await openChromium({ width: 1440, height: 1000 });
    page = browser.page;
    page.on('pageerror', (err) => pageErrors.push(err.message));
    page.on('console', (msg) => {
      if (msg.type() === 'error' && !/401|409/.test(msg.text())) pageErrors.push(msg.text());
    });
    await page.goto(`${service.url}/#q=${jobs}`);
    await page.getByTestId('token-prompt').waitFor();
    await page.locator('[data-testid=token-prompt] input').fill(token);
    await page.getByRole('button', { name: 'Use token' }).click();
    await page.getByTestId('jobs').waitFor();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await service?.stop();
    await cleanQueue(redis, jobs);
    await cleanQueue(redis, hooks);
    redis?.disconnect();
  });

  it('lists waiting jobs by page with a total that counts them, keys decoded, and opens the job view', async () => {
    const panel = page.getByTestId('jobs');
    await expect.poll(() => panel.locator('h3').innerText()).toContain('paused');
    await page.getByTestId('page-size').selectOption('10');
    await expect.poll(() => page.getByTestId('jobs-pager').innerText()).toContain('1–10 of 12');
    expect(await panel.locator('tbody tr').count()).toBe(10);
    expect(await panel.locator('tbody tr').first().innerText()).toContain('wait:00');
    expect(await panel.innerText()).not.toContain('%7E');
    await panel.getByRole('button', { name: 'Next' }).click();
    await expect.poll(() => page.getByTestId('jobs-pager').innerText()).toContain('11–12 of 12');
    await panel.getByTestId('job-wait:11').click();
    await expect.poll(() => page.getByTestId('job-data').innerText()).toContain('"i": 11');
    expect(await page.getByTestId('job-view').locator('h3').innerText()).toContain('wait:11');
    expect(await page.getByTestId('job-opts').innerText()).toContain('attempts');
    await page.getByTestId('job-view-close').click();
    await page.getByTestId('tab-completed').click();
    await expect.poll(() => panel.locator('tbody').innerText()).toContain('done:1');
  });

  it('shows a scheduled retry with its history and last error, its secret redacted', async () => {
    const panel = page.getByTestId('jobs');
    await page.getByTestId('tab-delayed').click();
    await expect.poll(() => panel.locator('tbody tr').count()).toBe(3);
    const row = panel.getByTestId('job-retry:1');
    expect(await row.innerText()).toContain('retry');
    expect(await panel.getByTestId('job-later:1').innerText()).toContain('scheduled');
    // Upcoming retries: the retry only, the jobs added with a delay counted apart.
    const upcoming = page.getByTestId('upcoming');
    await expect.poll(() => upcoming.locator('tbody tr').count()).toBe(1);
    expect(await upcoming.innerText()).toContain('retry:1');
    expect(await page.getByTestId('not-retries').innerText()).toContain(
      '2 jobs added with a delay',
    );
    // The graph: the completion and the retry of the setup, from the event stream.
    await expect.poll(() => page.getByTestId('graph-completed').innerText()).toBe('1');
    expect(await page.getByTestId('graph-retried').innerText()).toBe('1');
    await row.click();
    const view = page.getByTestId('job-view');
    await expect
      .poll(() => view.getByTestId('job-error').innerText())
      .toContain('transient failure 1/3');
    expect(await view.getByTestId('history').locator('tbody tr').count()).toBe(1);
    expect(await view.innerText()).not.toContain('sk_live_never_shown');
    await mkdir(join(repoRoot, 'docs/img'), { recursive: true });
    await page.screenshot({
      path: join(repoRoot, 'docs/img/dashboard-job-view.png'),
      fullPage: true,
    });
    await page.getByTestId('job-view-close').click();
  });

  it('retry-now moves the scheduled retry to waiting, delete removes the delayed job: checked in Redis', async () => {
    const panel = page.getByTestId('jobs');
    const retryId = jobIdForKey('retry:1');
    const laterId = jobIdForKey('later:1');
    await panel.getByTestId('job-retry:1').getByTestId('retry-now').click();
    await confirm();
    await expect
      .poll(() => page.getByTestId('notice').innerText())
      .toContain('moved to waiting: retry:1');
    expect(await redis.zscore(bull('delayed'), retryId)).toBeNull();
    expect(await redis.lpos(bull('wait'), retryId)).not.toBeNull();

    await panel.getByTestId('job-later:1').getByTestId('delete').click();
    await confirm();
    await expect.poll(() => page.getByTestId('notice').innerText()).toContain('deleted: later:1');
    expect(await redis.zscore(bull('delayed'), laterId)).toBeNull();
    expect(await redis.exists(jobKey(redis, jobs, laterId))).toBe(0);
    expect(await redis.exists(jobKey(redis, jobs, retryId))).toBe(1);
  });

  it('searches the DLQ by error text and by payload', async () => {
    const dlq = page.getByTestId('dlq');
    await page.getByTestId('dlq-search').fill('etimedout');
    await dlq.getByRole('button', { name: 'Search', exact: true }).click();
    await expect.poll(() => dlq.locator('tbody tr').count()).toBe(1);
    expect(await dlq.locator('tbody').innerText()).toContain('dead:d1');
    expect(await page.getByTestId('search-scope').innerText()).toContain('1 match in the newest 3');
    await page.getByTestId('dlq-search').fill('C-3');
    await dlq.getByRole('button', { name: 'Search', exact: true }).click();
    await expect.poll(() => dlq.locator('tbody').innerText()).toContain('dead:d3');
    expect(await dlq.locator('tbody tr').count()).toBe(1);
    await dlq.getByRole('button', { name: 'Clear search' }).click();
    await expect.poll(() => dlq.locator('tbody tr').count()).toBe(3);
  });

  it.each([390, 800, 1440])(
    'at %i px: no page scrolls sideways, every button within the width',
    async (width) => {
      await page.setViewportSize({ width, height: 900 });
      await page.getByTestId('tab-delayed').click();
      await page.getByTestId('job-later:2').click();
      await page.getByTestId('job-view').waitFor();
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
              `${el.tagName} "${(el.textContent ?? '').trim()}" ${Math.round(rect.left)}–${Math.round(rect.right)}`,
          ),
      }));
      await page.screenshot({
        path: join(repoRoot, `docs/img/dashboard-jobs-${width}.png`),
        fullPage: true,
      });
      await page.getByTestId('job-view-close').click();
      expect(layout.outside).toEqual([]);
      expect(layout.scrollWidth).toBeLessThanOrEqual(layout.innerWidth);
    },
  );

  it('bulk-selects two dead jobs and replays them: they leave the DLQ', async () => {
    await page.setViewportSize({ width: 1440, height: 1000 });
    const dlq = page.getByTestId('dlq');
    await expect.poll(() => dlq.locator('tbody tr').count()).toBe(3);
    await dlq.getByTestId('dead-dead:d2').getByTestId('select-dead').check();
    await dlq.getByTestId('dead-dead:d3').getByTestId('select-dead').check();
    await page.getByTestId('replay-selected').click();
    await confirm();
    await expect
      .poll(() => page.getByTestId('notice').innerText())
      .toContain('replayed 2 of 2 selected');
    const dead = await redis.zrange(requeueKeys(jobs).dead, 0, -1);
    expect(dead).toEqual([jobIdForKey('dead:d1')]);
  });

  it('resumes and pauses the queue from the jobs panel: BullMQ’s flag in Redis follows', async () => {
    const toggle = page.getByTestId('pause-toggle');
    await expect.poll(() => toggle.innerText()).toBe('Resume queue');
    await toggle.click();
    await confirm();
    await expect.poll(() => redis.hexists(bull('meta'), 'paused')).toBe(0);
    // Resumed, the worker takes the waiting jobs (the retried one among them).
    await until(
      'the waiting jobs run',
      () => admin(`/queues/${jobs}`),
      (q) => q.counts.waiting === 0,
    );
    await expect.poll(() => toggle.innerText()).toBe('Pause queue');
    await toggle.click();
    await confirm();
    await expect.poll(() => redis.hexists(bull('meta'), 'paused')).toBe(1);
    expect(pageErrors).toEqual([]);
  });
});
