import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { EndpointStore } from '../../src/redis/endpoint-store.js';
import { createQueue } from '../../src/scheduler/queue.js';
import {
  createEndpoint,
  createWebhookWorker,
  EndpointRegistry,
  endpointView,
  sendMessage,
  updateEndpoint,
  type WebhookWorker,
} from '../../workers/webhook/index.js';
import { onCleanup } from '../harness/cleanup.js';
import { cleanedQueueName, connect } from '../harness/redis.js';
import { WorkerEventLog } from '../harness/worker-events.js';

const logger = pino({ level: 'silent' });
const fastPolicy = { strategy: 'fixed', baseMs: 50, capMs: 50, maxAttempts: 5 } as const;
const allow = { allowPrivate: true };

function newSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

interface Hit {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
}

/** A loopback receiver answering `status(hit)` (200 unless told), keeping every request. */
async function receiver(status: (hit: Hit) => number = () => 200) {
  const hits: Hit[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const hit = {
        path: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        at: performance.now(),
      };
      hits.push(hit);
      res.writeHead(status(hit)).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onCleanup(() => new Promise((resolve) => server.close(resolve)));
  const port = (server.address() as AddressInfo).port;
  return { hits, url: (path: string) => `http://127.0.0.1:${port}${path}` };
}

/** Whether one of the `v1,` signatures of a request verifies with `secret`. */
function signedWith(secret: string, hit: Hit): boolean {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const id = String(hit.headers['webhook-id']);
  const ts = String(hit.headers['webhook-timestamp']);
  const expected = createHmac('sha256', key).update(`${id}.${ts}.${hit.body}`).digest();
  return String(hit.headers['webhook-signature'])
    .split(' ')
    .some((entry) => {
      const given = Buffer.from(entry.replace(/^v1,/, ''), 'base64');
      return given.length === expected.length && timingSafeEqual(given, expected);
    });
}

function setup(options: { workers?: number } = {}) {
  const redis = connect();
  onCleanup(() => redis.quit());
  const name = cleanedQueueName(redis, 'endpoints');
  const queue = createQueue(name, { connection: redis });
  const registry = new EndpointRegistry({ connection: redis, cacheTtlMs: 0 });
  const disabled = new EndpointStore({ connection: redis, cacheTtlMs: 0 });
  onCleanup(() => queue.close());
  const workers: WebhookWorker[] = [];
  for (let i = 0; i < (options.workers ?? 1); i++) {
    const worker = createWebhookWorker(name, {
      connection: redis,
      allowPrivate: true,
      policy: fastPolicy,
      concurrency: 8,
      logger,
      adaptiveConcurrency: false,
      registry: new EndpointRegistry({ connection: redis, cacheTtlMs: 0 }),
    });
    onCleanup(() => worker.close({ timeoutMs: 2_000 }));
    workers.push(worker);
  }
  const events = workers.map((w) => new WorkerEventLog(w));
  return { redis, name, queue, registry, disabled, workers, events };
}

async function waitUntil(check: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!check()) {
    if (performance.now() > deadline) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('endpoints and subscriptions', () => {
  it('creates, shows, updates and deletes an endpoint; a bad field names itself', async () => {
    const t = setup({ workers: 0 });
    const secret = newSecret();
    const created = await createEndpoint(
      t.registry,
      t.name,
      'ep-1',
      {
        url: 'http://127.0.0.1:9/hook',
        secrets: [secret],
        types: ['invoice.*', 'user.created'],
        headers: { 'x-tenant': 'acme', 'x-signing-key': 'hunter2hunter2' },
        secretHeaders: ['x-signing-key'],
        rateLimit: { perSecond: 5 },
        metadata: { owner: 'billing' },
        description: 'billing hooks',
      },
      allow,
    );
    expect(created).toMatchObject({ id: 'ep-1', types: ['invoice.*', 'user.created'] });
    await expect(
      createEndpoint(t.registry, t.name, 'ep-1', { url: 'http://127.0.0.1:9/x' }, allow),
    ).rejects.toThrow(/endpoint "ep-1" already exists/);

    const view = endpointView((await t.registry.get(t.name, 'ep-1'))!);
    expect(JSON.stringify(view)).not.toContain(secret);
    expect(JSON.stringify(view)).not.toContain('hunter2hunter2');
    expect(view.headers).toEqual({ 'x-tenant': 'acme', 'x-signing-key': '[redacted]' });

    const rotated = newSecret();
    const updated = await updateEndpoint(
      t.registry,
      t.name,
      'ep-1',
      { secrets: [secret, rotated], description: null },
      allow,
    );
    expect(updated.secrets).toEqual([secret, rotated]);
    expect(updated.description).toBeUndefined();
    expect(updated.updatedAt).toBeGreaterThanOrEqual(created.updatedAt);
    await expect(
      updateEndpoint(t.registry, t.name, 'ep-1', { rateLimit: { perSecond: -1 } }),
    ).rejects.toThrow(/^endpoint\.rateLimit\.perSecond: /);
    await expect(updateEndpoint(t.registry, t.name, 'nope', { description: 'x' })).rejects.toThrow(
      /no endpoint "nope"/,
    );
    expect((await t.registry.list(t.name)).map((e) => e.id)).toEqual(['ep-1']);
    expect(await t.registry.delete(t.name, 'ep-1')).toBe(true);
    expect(await t.registry.get(t.name, 'ep-1')).toBeUndefined();
  });

  it('refuses a private address at create time unless allowed (the SSRF guard)', async () => {
    const t = setup({ workers: 0 });
    await expect(
      createEndpoint(t.registry, t.name, 'ep', { url: 'http://127.0.0.1:9/hook' }),
    ).rejects.toThrow(/^endpoint\.url: refused to connect to 127\.0\.0\.1: .*allowPrivate/);
    await expect(
      createEndpoint(t.registry, t.name, 'ep', { url: 'http://169.254.169.254/latest' }, allow),
    ).rejects.toThrow(/^endpoint\.url: refused/);
    await expect(
      updateEndpoint(t.registry, t.name, 'ep', { url: 'http://10.0.0.1/' }),
    ).rejects.toThrow(/^endpoint\.url: refused/);
    expect(await t.registry.list(t.name)).toEqual([]);
  });

  it('fans a message out to the endpoints subscribed to its type, once per (message, endpoint)', async () => {
    const t = setup();
    const r = await receiver();
    const old = newSecret();
    const rotated = newSecret();
    await createEndpoint(
      t.registry,
      t.name,
      'invoices',
      {
        url: r.url('/invoices'),
        types: ['invoice.*'],
        secrets: [old, rotated],
        headers: { 'x-tenant': 'acme' },
      },
      allow,
    );
    await createEndpoint(t.registry, t.name, 'all', { url: r.url('/all') }, allow);
    await createEndpoint(
      t.registry,
      t.name,
      'users',
      { url: r.url('/users'), types: ['user.created'] },
      allow,
    );
    await createEndpoint(t.registry, t.name, 'off', { url: r.url('/off') }, allow);
    await t.disabled.disable(t.name, 'off', 'by a test');

    const send = () =>
      sendMessage(
        t.queue,
        { type: 'invoice.paid', payload: { amount: 42 }, id: 'msg-1' },
        { registry: t.registry, disabled: t.disabled },
      );
    const sent = await send();
    expect(sent.id).toBe('msg-1');
    expect(sent.endpoints.map((e) => e.endpointId).sort()).toEqual(['all', 'invoices']);
    // Sent again (a client's retry): the same deliveries, nothing added twice.
    expect(
      (await send()).endpoints.sort((a, b) => a.endpointId.localeCompare(b.endpointId)),
    ).toEqual([...sent.endpoints].sort((a, b) => a.endpointId.localeCompare(b.endpointId)));
    await t.events[0]!.waitForCount('job:completed', 2);
    await waitUntil(() => r.hits.length >= 2);
    expect(r.hits.map((h) => h.path).sort()).toEqual(['/all', '/invoices']);
    const hit = r.hits.find((h) => h.path === '/invoices')!;
    expect(hit.headers['webhook-id']).toBe('msg-1');
    expect(hit.headers['x-tenant']).toBe('acme');
    // Rotation: both signatures are sent; a receiver holding either secret accepts.
    expect(String(hit.headers['webhook-signature']).split(' ')).toHaveLength(2);
    expect(signedWith(old, hit) && signedWith(rotated, hit)).toBe(true);
    expect(JSON.parse(hit.body)).toMatchObject({ type: 'invoice.paid', data: { amount: 42 } });
    // Delivery ids are in requeue's job-id namespace, never the raw message id.
    for (const e of sent.endpoints) expect(e.deliveryId).not.toBe('msg-1');
  });

  it('delivers to the URL and secret the endpoint has at delivery time, and dead-letters a deleted one', async () => {
    const t = setup();
    const r = await receiver(() => 503);
    // Their own schedule (the per-endpoint override): more attempts than the worker's 5.
    const policy = { strategy: 'fixed', baseMs: 50, capMs: 50, maxAttempts: 1_000 } as const;
    await createEndpoint(t.registry, t.name, 'moving', { url: r.url('/old'), policy }, allow);
    await createEndpoint(t.registry, t.name, 'leaving', { url: r.url('/leaving'), policy }, allow);
    await sendMessage(t.queue, { type: 'a', payload: 1 }, { registry: t.registry });
    await waitUntil(() => r.hits.some((h) => h.path === '/old'));
    const secret = newSecret();
    const moved = await receiver();
    await updateEndpoint(
      t.registry,
      t.name,
      'moving',
      { url: moved.url('/new'), secrets: [secret] },
      allow,
    );
    await t.registry.delete(t.name, 'leaving');
    await t.events[0]!.waitFor('job:completed');
    const dead = await t.events[0]!.waitFor('job:dead-lettered');
    expect(dead.record.reason).toBe('endpoint-disabled');
    expect(moved.hits).toHaveLength(1);
    expect(moved.hits[0]!.path).toBe('/new');
    expect(signedWith(secret, moved.hits[0]!)).toBe(true);
  });

  it('names the field of a bad message: type over the bound, payload over the limit', async () => {
    const t = setup({ workers: 0 });
    const opts = { registry: t.registry, maxPayloadBytes: 1_000 };
    await expect(sendMessage(t.queue, { type: 'x'.repeat(201), payload: 1 }, opts)).rejects.toThrow(
      /^message\.type: must be 1–200 visible ASCII characters$/,
    );
    await expect(
      sendMessage(t.queue, { type: 'a', payload: 'x'.repeat(2_000) }, opts),
    ).rejects.toThrow(/^message\.payload: must be at most 1000 bytes as JSON, got 2002$/);
    await expect(sendMessage(t.queue, { type: 'a', payload: 1, id: 'a.b' }, opts)).rejects.toThrow(
      /^message\.id: /,
    );
  });
});

describe('per-endpoint rate limit, fleet-wide', () => {
  it('spaces deliveries to the limit across two workers; the waiting ones are deferred, not failed', async () => {
    const t = setup({ workers: 2 });
    const deferred: { key: string; reason: string }[] = [];
    for (const w of t.workers) w.on('job:deferred', (e) => deferred.push(e));
    const r = await receiver();
    await createEndpoint(
      t.registry,
      t.name,
      'slow',
      { url: r.url('/slow'), rateLimit: { perSecond: 10, burst: 2 } },
      allow,
    );
    await createEndpoint(t.registry, t.name, 'free', { url: r.url('/free') }, allow);
    const sentAt = performance.now();
    for (let i = 0; i < 12; i++)
      await sendMessage(t.queue, { type: 't', payload: i, id: `m-${i}` }, { registry: t.registry });
    // A receiver's answer comes before the job's completion is stored and announced.
    const completions = () => t.events.flatMap((e) => e.all('job:completed'));
    await waitUntil(() => r.hits.length >= 24 && completions().length >= 24);
    const slow = r.hits.filter((h) => h.path === '/slow').map((h) => h.at);
    // 12 at 10/s with a burst of 2: the last slot is 10 intervals of 100 ms after the first,
    // which is no earlier than the sending (a delivery is never before its slot; it may be late).
    expect(slow).toHaveLength(12);
    expect(slow.at(-1)! - sentAt).toBeGreaterThanOrEqual(990);
    expect(completions()).toHaveLength(24);
    // Every delivery succeeded on its first attempt: waiting for the limit used none.
    expect(t.events.flatMap((e) => e.all('retry:scheduled'))).toEqual([]);
    expect(t.events.flatMap((e) => e.all('job:dead-lettered'))).toEqual([]);
    // Those over the burst waited for their reserved slot, each at most once (how many found
    // their slot already due depends on the machine's load); the unlimited endpoint never did.
    const waited = deferred.filter((d) => d.reason === 'rate-limit');
    expect(waited.length).toBeGreaterThanOrEqual(1);
    expect(waited.length).toBeLessThanOrEqual(12);
    expect(waited.every((d) => d.key === 'slow')).toBe(true);
  });
});
