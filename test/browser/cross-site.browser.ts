import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import type { RedisClient } from '../../src/redis/connection.js';
import { EndpointStore } from '../../src/redis/endpoint-store.js';
import { parseServiceConfig } from '../../workers/service/config.js';
import { startService, type RunningService } from '../../workers/service/service.js';
import { cleanQueue, connect, redisUrl, uniqueQueueName } from '../harness/redis.js';

/**
 * Issue 21, part 2, in a real browser: the service on loopback without an
 * admin token, a disabled webhook endpoint, and pages of other origins
 * (another loopback address, another port of 127.0.0.1, a rebound name) that
 * try what an attacker's page can: a `no-cors` POST and a form POST to
 * re-enable the endpoint, and a fetch that reads the DLQ. The endpoint stays
 * disabled and nothing is read; the dashboard, same-origin, still enables it.
 */

const chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const endpointId = 'ep-cross-site';
const rebound = 'rebound.requeue.test';

let redis: RedisClient;
let endpoints: EndpointStore;
let service: RunningService;
let browser: Browser;
const attackers: Server[] = [];
const hooks = uniqueQueueName('xsite-hooks');

/** An attacker's page: every trick at once, results on `window.results`. */
function attackPage(target: string, queue: string): string {
  const enable = `${target}/admin/queues/${queue}/endpoints/${endpointId}/enable`;
  return `<!doctype html><html><body>
<form id="f" method="POST" action="${enable}" target="sink"><input name="a" value="1"></form>
<iframe name="sink"></iframe>
<script>
window.results = {};
(async () => {
  try { await fetch(${JSON.stringify(enable)}, { method: 'POST', mode: 'no-cors' }); results.noCors = 'sent'; }
  catch (e) { results.noCors = 'failed: ' + e; }
  try { await fetch(${JSON.stringify(enable)}, { method: 'POST', mode: 'no-cors', body: 'x', headers: { 'content-type': 'text/plain' } }); results.noCorsBody = 'sent'; }
  catch (e) { results.noCorsBody = 'failed: ' + e; }
  try { const r = await fetch(${JSON.stringify(`${target}/admin/queues/${queue}/dlq`)}); results.read = await r.text(); }
  catch (e) { results.read = 'blocked'; }
  document.getElementById('f').submit();
  results.done = true;
})();
</script></body></html>`;
}

async function serveAttacker(host: string, target: string): Promise<string> {
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end(attackPage(target, hooks));
  });
  attackers.push(server);
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return `http://${host}:${(server.address() as AddressInfo).port}/`;
}

/** Loads `url` and waits until its script has tried everything; the service's answers to it. */
async function attack(page: Page, url: string): Promise<{ status: number; url: string }[]> {
  const answers: { status: number; url: string }[] = [];
  page.on('response', (response) => {
    if (response.url().startsWith(service.url))
      answers.push({ status: response.status(), url: response.url() });
  });
  await page.goto(url);
  await page.waitForFunction(
    () => (window as unknown as { results: { done?: boolean } }).results.done,
  );
  // The form's navigation (in the iframe) is answered too.
  await expect
    .poll(() => answers.filter((a) => a.url.endsWith('/enable')).length)
    .toBeGreaterThanOrEqual(3);
  return answers;
}

describe('the admin API refuses other sites, in chromium', () => {
  beforeAll(async () => {
    if (!existsSync(chromiumPath))
      throw new Error(`${chromiumPath} not found: apt-get install chromium (or set CHROMIUM_PATH)`);
    redis = connect();
    endpoints = new EndpointStore({ connection: redis, cacheTtlMs: 0 });
    service = await startService(
      parseServiceConfig({ port: 0, redisUrl: redisUrl(), webhooks: { queue: hooks } }, {}),
      createLogger({ level: 'silent' }),
    );
    browser = await chromium.launch({
      executablePath: chromiumPath,
      headless: true,
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--no-first-run',
        '--disable-background-networking',
        // The rebound name: an attacker's DNS answering 127.0.0.1 after the page loaded.
        `--host-resolver-rules=MAP ${rebound} 127.0.0.1`,
      ],
    });
  });

  afterAll(async () => {
    await browser?.close();
    for (const server of attackers) await new Promise((resolve) => server.close(resolve));
    await service?.stop();
    await endpoints?.close();
    await cleanQueue(redis, hooks);
    redis?.disconnect();
  });

  it('a no-cors POST and a form POST from another origin do not re-enable a disabled endpoint, and its fetch reads nothing', async () => {
    const pages = [
      await serveAttacker('127.0.0.2', service.url), // another loopback address: cross-site
      await serveAttacker('127.0.0.1', service.url), // another port of 127.0.0.1: same-site
    ];
    for (const url of pages) {
      await endpoints.disable(hooks, endpointId, 'disabled by the test', Date.now());
      const page = await browser.newPage();
      const answers = await attack(page, url);
      const posts = answers.filter((a) => a.url.endsWith('/enable'));
      expect(posts.map((a) => a.status)).toEqual(posts.map(() => 403));
      const results = await page.evaluate(
        () => (window as unknown as { results: Record<string, string> }).results,
      );
      expect(results.read).toBe('blocked');
      expect(await endpoints.isDisabled(hooks, endpointId), url).toBe(true);
      await page.close();
    }
  });

  it('a rebound name (DNS rebinding) gets neither the dashboard nor the DLQ', async () => {
    const port = new URL(service.url).port;
    const page = await browser.newPage();
    const landing = await page.goto(`http://${rebound}:${port}/`);
    expect(landing?.status()).toBe(421);
    // The page is now "same-origin" with the service as far as the browser knows.
    const read = await page.evaluate(async (queue) => {
      const r = await fetch(`/admin/queues/${queue}/dlq`);
      return { status: r.status, body: await r.text() };
    }, hooks);
    expect(read.status).toBe(421);
    expect(read.body).not.toContain('"items"');
    await endpoints.disable(hooks, endpointId, 'disabled by the test', Date.now());
    const post = await page.evaluate(
      async (path) => (await fetch(path, { method: 'POST' })).status,
      `/admin/queues/${hooks}/endpoints/${endpointId}/enable`,
    );
    expect(post).toBe(421);
    expect(await endpoints.isDisabled(hooks, endpointId)).toBe(true);
    await page.close();
  });

  it('the dashboard, same-origin, still lists and enables the endpoint', async () => {
    await endpoints.disable(hooks, endpointId, 'disabled by the test', Date.now());
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on('pageerror', (err) => errors.push(err.message));
    await page.goto(`${service.url}/`);
    const panel = page.getByTestId('endpoints');
    await expect.poll(() => panel.innerText()).toContain(endpointId);
    await panel.getByRole('button', { name: 'Enable' }).click();
    await page.getByTestId('confirm-yes').click();
    await expect.poll(() => page.getByTestId('notice').innerText()).toContain('enabled');
    expect(await endpoints.isDisabled(hooks, endpointId)).toBe(false);
    expect(errors).toEqual([]);
    await page.close();
  });
});
