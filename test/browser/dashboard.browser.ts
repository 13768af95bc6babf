import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import type { AttemptRecord } from '../../src/policy/job-state.js';
import type { RedisClient } from '../../src/redis/connection.js';
import { jobIdForKey } from '../../src/scheduler/job-id.js';
import { parseServiceConfig } from '../../workers/service/config.js';
import { startService, type RunningService } from '../../workers/service/service.js';
import { repoRoot } from '../harness/child.js';
import { openChromium, type OpenChromium } from '../harness/chromium.js';
import { seedDead } from '../harness/dlq.js';
import { cleanQueue, connect, redisUrl, uniqueQueueName } from '../harness/redis.js';

/**
 * The dashboard in a real browser: Debian's chromium (no download), driven by
 * playwright-core, against the service on loopback with a real Redis. It
 * loads, asks for the admin token, shows a dead job with its history, replays
 * it (after asking), shows a breaker opened through the API and charts the
 * scheduled retries. Screenshots: test/browser/screenshots/.
 */

const screenshots = join(repoRoot, 'test/browser/screenshots');
const token = 'browser-test-admin-token-0123456789';
const retryDelayMs = 120_000;

let redis: RedisClient;
let service: RunningService;
let browser: OpenChromium | undefined;
let page: Page;
const jobs = uniqueQueueName('ui-jobs');
const hooks = uniqueQueueName('ui-hooks');
const pageErrors: string[] = [];

/** A response body, read freely by the assertions. */
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

const shot = (name: string) =>
  page.screenshot({ path: join(screenshots, `${name}.png`), fullPage: true });

function history(now: number): AttemptRecord[] {
  return [1, 2, 3].map((attempt) => ({
    attempt,
    startedAt: now - (4 - attempt) * 60_000,
    finishedAt: now - (4 - attempt) * 60_000 + 120 * attempt,
    outcome: 'failed',
    error: {
      class: 'HttpError',
      message: 'upstream answered 503: service unavailable',
      status: 503,
    },
    classification: 'http-status',
    decision: attempt < 3 ? 'retry' : 'dead-letter',
    ...(attempt < 3 ? { delayMs: 1000 * 2 ** attempt } : { deadReason: 'max-attempts' as const }),
    details: { status: 503, latencyMs: 120 * attempt },
  }));
}

describe('the dashboard in chromium', () => {
  beforeAll(async () => {
    await mkdir(screenshots, { recursive: true });
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
    browser = await openChromium({ width: 1440, height: 1000 });
    page = browser.page;
    page.on('pageerror', (err) => pageErrors.push(err.message));
    page.on('console', (msg) => {
      // The first API call is refused until the token is given: that 401 is expected.
      if (msg.type() === 'error' && !msg.text().includes('401')) pageErrors.push(msg.text());
    });
    // Nothing may come from the internet: every request stays on the service.
    page.on('request', (request) => {
      if (!request.url().startsWith(service.url))
        pageErrors.push(`off-site request ${request.url()}`);
    });
  });

  afterAll(async () => {
    await browser?.close();
    await service?.stop();
    await cleanQueue(redis, jobs);
    await cleanQueue(redis, hooks);
    redis?.disconnect();
  });

  it('asks for the token, then shows the queues, the retry chart and a dead job with its history', async () => {
    const now = Date.now();
    // A job added with the key `order-42`, as requeue stores it (its id is the key's, in the
    // namespace no BullMQ key can share); the dashboard shows the key.
    await seedDead(redis, {
      source: jobs,
      id: jobIdForKey('order-42'),
      idempotencyKey: 'order-42',
      name: 'charge',
      data: { order: 42, apiKey: 'sk_live_do_not_show' },
      opts: {},
      reason: 'max-attempts',
      message: 'upstream answered 503: service unavailable',
      attempts: 3,
      history: history(now),
      firstFailedAt: now - 180_000,
      deadAt: now - 1000,
      replays: 0,
    });
    await seedDead(redis, {
      source: jobs,
      id: 'refund-7',
      name: 'refund',
      data: { refund: 7 },
      opts: {},
      reason: 'permanent-error',
      message: 'bad request: unknown account',
      attempts: 1,
      history: [],
      deadAt: now - 60_000,
      replays: 0,
    });
    // Three jobs that fail and wait 2 minutes for their retry.
    for (let i = 0; i < 3; i += 1)
      await fetch(`${service.url}/v1/jobs/${jobs}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'sync', data: { fail: 'always', n: i } }),
      });
    await until(
      'three scheduled retries',
      () => admin(`/queues/${jobs}/schedule`),
      (s) => s.due.withinHour === 3,
    );

    await page.goto(`${service.url}/#q=${jobs}`);
    await page.getByTestId('token-prompt').waitFor();
    await shot('01-token');
    await page.locator('[data-testid=token-prompt] input').fill(token);
    await page.getByRole('button', { name: 'Use token' }).click();

    const card = page.getByTestId(`queue-${jobs}`);
    await expect.poll(() => card.getByTestId('count-dead').innerText()).toContain('2');
    await expect.poll(() => card.getByTestId('count-delayed').innerText()).toContain('3');

    // The retry chart: three retries due within the hour, drawn as bars.
    await expect.poll(() => page.getByTestId('due-hour').innerText()).toBe('3');
    await expect.poll(() => page.locator('[data-testid=upcoming] tbody tr').count()).toBe(3);
    expect(await page.locator('[data-testid=upcoming] .badge').allInnerTexts()).toEqual([
      'retry',
      'retry',
      'retry',
    ]);
    const barPixels = await page.evaluate(() => {
      const canvas = document.querySelector<HTMLCanvasElement>('[data-testid=retry-chart] canvas');
      if (!canvas) return -1;
      const data = canvas.getContext('2d')!.getImageData(0, 0, canvas.width, canvas.height).data;
      let blue = 0;
      for (let i = 0; i < data.length; i += 4)
        if (data[i + 2]! > 150 && data[i + 2]! - data[i]! > 40 && data[i + 3]! > 0) blue += 1;
      return blue;
    });
    expect(barPixels).toBeGreaterThan(50);

    // Any job's next attempt: one of the retrying jobs, looked up by id.
    const { upcoming } = await admin(`/queues/${jobs}/schedule?limit=1`);
    await page.getByTestId('lookup-id').fill(upcoming[0].id);
    await page.getByRole('button', { name: 'Look up' }).click();
    const found = page.getByTestId('lookup-result');
    await found.waitFor();
    const text = await found.innerText();
    expect(text).toContain('delayed');
    expect(text).toContain('retry');
    expect(text).toMatch(/next attempt in 1m \d+s/);
    expect(text).toContain('service unavailable');

    // The DLQ filtered by reason: only the job that ran out of attempts.
    const deadRows = page.locator('[data-testid=dlq] tr[data-testid^=dead-]');
    await expect.poll(() => deadRows.count()).toBe(2);
    await page.getByTestId('filter-reason').selectOption('max-attempts');
    await expect.poll(() => deadRows.count()).toBe(1);
    expect(await deadRows.first().getAttribute('data-testid')).toBe('dead-order-42');

    // The dead job, opened: its attempt history.
    const row = page.getByTestId('dead-order-42');
    await row.waitFor();
    await row.click();
    const attempts = page.getByTestId('dlq').locator('[data-testid=history] tbody tr');
    await expect.poll(() => attempts.count()).toBe(3);
    const first = await attempts.nth(0).innerText();
    expect(first).toContain('503');
    expect(first).toContain('120 ms');
    expect(first).toContain('retry');
    expect(first).toContain('2.0 s');
    expect(await attempts.nth(2).innerText()).toContain('dead (max-attempts)');
    expect(await page.content()).not.toContain('sk_live_do_not_show');
    await shot('02-dead-job-history');
    await page.screenshot({ path: join(screenshots, 'dashboard.png') });
  });

  it('replays the dead job from the page after asking, and it is back in the queue', async () => {
    await page.getByTestId('dead-order-42').getByRole('button', { name: 'Replay' }).click();
    const confirm = page.getByTestId('confirm');
    await confirm.waitFor();
    expect(await confirm.innerText()).toContain('Replay dead job order-42?');
    await shot('03-confirm-replay');
    await page.getByTestId('confirm-yes').click();
    await expect.poll(() => page.getByTestId('notice').innerText()).toContain('replayed 1 of 1');
    const job = await until(
      'the replayed job in the queue',
      () => admin(`/queues/${jobs}/jobs/order-42`),
      (j) => j.where !== 'dead',
    );
    // Back in the queue with fresh attempts; its worker may already have run it.
    expect(['waiting', 'active', 'delayed', 'completed']).toContain(job.where);
    expect(job.replays).toBe(1);
    expect((await admin(`/queues/${jobs}/dlq`)).total).toBe(1);
    await expect.poll(() => page.getByTestId('dlq').innerText()).toContain('No dead job matches');
    await shot('04-replayed');
  });

  it('shows a breaker opened through the API as open', async () => {
    const opened = await admin(`/queues/${hooks}/breakers/open`, {
      method: 'POST',
      body: JSON.stringify({ key: 'ep_partner' }),
    });
    expect(opened).toMatchObject({ state: 'open', isolated: true });
    await page.getByTestId(`queue-${hooks}`).click();
    const row = page.getByTestId('breaker-ep_partner');
    await row.waitFor();
    expect(await row.innerText()).toContain('open (isolated)');
    expect(await page.getByTestId('endpoints').innerText()).toContain('ep_partner');
    await shot('05-breaker-open');
    // No script error, no failed request (a 404 would mean the page asked for something wrong).
    expect(pageErrors).toEqual([]);
  });
});
