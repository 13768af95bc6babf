import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import type { RedisClient } from '../../src/redis/connection.js';
import { EndpointStore } from '../../src/redis/endpoint-store.js';
import { RequeueMetrics } from '../../src/scheduler/metrics.js';
import { parseServiceConfig } from '../../workers/service/config.js';
import { createIntakeServer } from '../../workers/service/http.js';
import { startService, type RunningService } from '../../workers/service/service.js';
import { cleanQueue, connect, redisUrl, uniqueQueueName } from '../harness/redis.js';

/**
 * Issue 21, part 2: the admin API and the dashboard answer only their own
 * origin. Raw HTTP on loopback with the headers a browser under attack would
 * send (a rebound `Host`, a cross-site `Origin`, `Sec-Fetch-Site`), against
 * the real service: without a token (loopback) and with one.
 */

const token = 'site-test-admin-token-0123456789';
const endpointId = 'ep-disabled';

interface RawAnswer {
  status: number;
  body: string;
}

/** One request with exactly these headers (Node's fetch would not send a foreign `Host`). */
function raw(
  url: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<RawAnswer> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { hostname, port, method, path, headers: { ...headers, connection: 'close' } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

let redis: RedisClient;
let open: RunningService;
let guarded: RunningService;
let endpoints: EndpointStore;
const hooks = uniqueQueueName('site-hooks');
const tokenHooks = uniqueQueueName('site-hooks-token');

const hostOf = (url: string) => new URL(url).host;
const enablePath = (queue: string) => `/admin/queues/${queue}/endpoints/${endpointId}/enable`;

async function disabled(queue: string): Promise<boolean> {
  return endpoints.isDisabled(queue, endpointId);
}

describe('the admin API answers only its own origin', () => {
  beforeAll(async () => {
    redis = connect();
    endpoints = new EndpointStore({ connection: redis, cacheTtlMs: 0 });
    const logger = createLogger({ level: 'silent' });
    open = await startService(
      parseServiceConfig(
        {
          port: 0,
          redisUrl: redisUrl(),
          webhooks: { queue: hooks },
          admin: { allowedHosts: ['requeue.internal'] },
        },
        {},
      ),
      logger,
    );
    guarded = await startService(
      parseServiceConfig(
        { port: 0, redisUrl: redisUrl(), webhooks: { queue: tokenHooks }, admin: { token } },
        {},
      ),
      logger,
    );
  });

  afterAll(async () => {
    await open?.stop();
    await guarded?.stop();
    await endpoints?.close();
    await cleanQueue(redis, hooks);
    await cleanQueue(redis, tokenHooks);
    redis?.disconnect();
  });

  it('a rebinding Host (another site resolving to 127.0.0.1) cannot read the DLQ, breakers, dashboard or a route added later', async () => {
    for (const path of [
      `/admin/queues/${hooks}/dlq`,
      `/admin/queues/${hooks}/breakers`,
      `/admin/queues/${hooks}/jobs/x`,
      '/',
      '/app.js',
      '/admin/no-such-route-yet',
      '/metrics',
    ]) {
      const answer = await raw(open.url, 'GET', path, {
        host: `attacker.example:${new URL(open.url).port}`,
      });
      expect(answer.status, path).toBe(421);
      expect(JSON.parse(answer.body).error, path).toMatch(/host "attacker\.example:\d+"/);
    }
  });

  it('loopback names and addresses with any port, and a configured host name, are answered', async () => {
    const port = new URL(open.url).port;
    for (const host of [
      `127.0.0.1:${port}`,
      `localhost:${port}`,
      `LOCALHOST:${port}`,
      'localhost',
      `127.9.8.7:${port}`,
      `[::1]:${port}`,
      `requeue.internal:${port}`,
      'Requeue.Internal',
    ]) {
      const answer = await raw(open.url, 'GET', `/admin/queues/${hooks}/dlq`, { host });
      expect(answer.status, host).toBe(200);
    }
    for (const host of [
      'localhost.attacker.example',
      '127.0.0.1.nip.io',
      'requeue.internal.evil',
    ]) {
      const answer = await raw(open.url, 'GET', `/admin/queues/${hooks}/dlq`, { host });
      expect(answer.status, host).toBe(421);
    }
  });

  it('a cross-site bodyless POST (no-cors fetch) does not re-enable a disabled endpoint', async () => {
    await endpoints.disable(hooks, endpointId, 'test', Date.now());
    const answer = await raw(open.url, 'POST', enablePath(hooks), {
      host: hostOf(open.url),
      origin: 'http://attacker.example',
      'sec-fetch-site': 'cross-site',
      'sec-fetch-mode': 'no-cors',
    });
    expect(answer.status).toBe(403);
    expect(JSON.parse(answer.body).error).toMatch(/cross-site/);
    expect(await disabled(hooks)).toBe(true);
  });

  it('a cross-site POST with a body (a form, a JSON fetch) changes nothing', async () => {
    await endpoints.disable(hooks, endpointId, 'test', Date.now());
    const form = await raw(
      open.url,
      'POST',
      enablePath(hooks),
      {
        host: hostOf(open.url),
        origin: 'http://attacker.example',
        'content-type': 'application/x-www-form-urlencoded',
      },
      'a=1',
    );
    expect(form.status).toBe(403);
    const json = await raw(
      open.url,
      'POST',
      `/admin/queues/${hooks}/endpoints/other/disable`,
      { host: hostOf(open.url), origin: 'http://attacker.example', 'content-type': 'text/plain' },
      '{"reason":"x"}',
    );
    expect(json.status).toBe(403);
    expect(await endpoints.isDisabled(hooks, 'other')).toBe(false);
    expect(await disabled(hooks)).toBe(true);
  });

  it('Sec-Fetch-Site cross-site or same-site, Origin null, or another port of the same host is foreign', async () => {
    await endpoints.disable(hooks, endpointId, 'test', Date.now());
    const port = Number(new URL(open.url).port);
    const foreign: Record<string, string>[] = [
      { 'sec-fetch-site': 'cross-site' },
      { 'sec-fetch-site': 'same-site' },
      { origin: 'null' },
      { origin: `http://127.0.0.1:${port + 1}` },
      { origin: `https://${hostOf(open.url)}` },
      { origin: `http://localhost:${port}` },
    ];
    for (const headers of foreign) {
      for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
        const answer = await raw(open.url, method, enablePath(hooks), {
          host: hostOf(open.url),
          ...headers,
        });
        expect(answer.status, `${method} ${JSON.stringify(headers)}`).toBe(403);
      }
    }
    expect(await disabled(hooks)).toBe(true);
  });

  it('same-origin use (the dashboard) and clients without Origin (curl, the CLI) keep working', async () => {
    await endpoints.disable(hooks, endpointId, 'test', Date.now());
    const sameOrigin = await raw(open.url, 'POST', enablePath(hooks), {
      host: hostOf(open.url),
      origin: open.url,
      'sec-fetch-site': 'same-origin',
    });
    expect(sameOrigin.status).toBe(200);
    expect(await disabled(hooks)).toBe(false);
    const typed = await raw(open.url, 'GET', `/admin/queues/${hooks}/dlq`, {
      host: hostOf(open.url),
      'sec-fetch-site': 'none',
    });
    expect(typed.status).toBe(200);
    await endpoints.disable(hooks, endpointId, 'test', Date.now());
    const curl = await raw(open.url, 'POST', enablePath(hooks), { host: hostOf(open.url) });
    expect(curl.status).toBe(200);
    expect(await disabled(hooks)).toBe(false);
  });

  it('with a token, any Host may ask, but a cross-site POST is refused even with the token', async () => {
    const port = new URL(guarded.url).port;
    const proxied = await raw(guarded.url, 'GET', `/admin/queues/${tokenHooks}/dlq`, {
      host: `requeue.example.com:${port}`,
      authorization: `Bearer ${token}`,
    });
    expect(proxied.status).toBe(200);
    await endpoints.disable(tokenHooks, endpointId, 'test', Date.now());
    const crossSite = await raw(guarded.url, 'POST', enablePath(tokenHooks), {
      host: hostOf(guarded.url),
      authorization: `Bearer ${token}`,
      origin: 'http://attacker.example',
    });
    expect(crossSite.status).toBe(403);
    expect(await disabled(tokenHooks)).toBe(true);
    const intake = await raw(
      guarded.url,
      'POST',
      `/v1/jobs/${tokenHooks}`,
      { host: hostOf(guarded.url), 'sec-fetch-site': 'cross-site', 'content-type': 'text/plain' },
      '{"data":1}',
    );
    expect(intake.status).toBe(403);
    const sameOrigin = await raw(guarded.url, 'POST', enablePath(tokenHooks), {
      host: hostOf(guarded.url),
      authorization: `Bearer ${token}`,
      origin: guarded.url,
      'sec-fetch-site': 'same-origin',
    });
    expect(sameOrigin.status).toBe(200);
    expect(await disabled(tokenHooks)).toBe(false);
  });

  it('behind a TLS proxy, the https Origin of the forwarded host is the same origin', async () => {
    await endpoints.disable(tokenHooks, endpointId, 'test', Date.now());
    const answer = await raw(guarded.url, 'POST', enablePath(tokenHooks), {
      host: 'requeue.example.com',
      'x-forwarded-proto': 'https',
      authorization: `Bearer ${token}`,
      origin: 'https://requeue.example.com',
      'sec-fetch-site': 'same-origin',
    });
    expect(answer.status).toBe(200);
    expect(await disabled(tokenHooks)).toBe(false);
  });

  it('a route added to the server later is behind the same rule, without a check of its own', async () => {
    const app = await createIntakeServer({
      queues: new Map(),
      ready: async () => true,
      metrics: new RequeueMetrics(),
      maxBodyBytes: 1024,
      logger: createLogger({ level: 'silent' }),
    });
    let ran = 0;
    app.get('/later', async () => ({ ran: ++ran }));
    app.post('/later', async () => ({ ran: ++ran }));
    const rebound = await app.inject({
      method: 'GET',
      url: '/later',
      headers: { host: 'x.example' },
    });
    expect(rebound.statusCode).toBe(421);
    const crossSite = await app.inject({
      method: 'POST',
      url: '/later',
      headers: { host: 'localhost', origin: 'http://x.example' },
    });
    expect(crossSite.statusCode).toBe(403);
    expect(ran).toBe(0);
    const local = await app.inject({
      method: 'GET',
      url: '/later',
      headers: { host: 'localhost' },
    });
    expect(local.json()).toEqual({ ran: 1 });
    await app.close();
  });
});
