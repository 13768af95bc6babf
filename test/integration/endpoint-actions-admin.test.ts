import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { parseBreakerOptions } from '../../src/policy/breaker/breaker-options.js';
import { RequeueMetrics } from '../../src/scheduler/metrics.js';
import { createQueue, type RequeueQueue } from '../../src/scheduler/queue.js';
import { registerAdmin } from '../../workers/service/admin/index.js';
import { createIntakeServer, type IntakeServer } from '../../workers/service/http.js';
import {
  createWebhookWorker,
  enqueueWebhook,
  type WebhookWorker,
} from '../../workers/webhook/webhook-worker.js';
import { cleanQueue, connect, uniqueQueueName, type RedisClient } from '../harness/redis.js';
import { WorkerEventLog } from '../harness/worker-events.js';

/** Issue 24, item 5 through the admin API: resend, recover (dry run, progress), retry-now. */

const logger = createLogger({ level: 'silent' });
const name = uniqueQueueName('ep-actions');
let redis: RedisClient;
let app: IntakeServer;
let url: string;
let queue: RequeueQueue;
let worker: WebhookWorker;
let events: WorkerEventLog;
let receiver: Server;
const statuses = new Map<string, number[]>([
  ['/down', [400, 400, 400]],
  ['/later', [503]],
]);

beforeAll(async () => {
  redis = connect();
  receiver = createServer((req, res) => {
    req.resume();
    res.writeHead(statuses.get(req.url ?? '')?.shift() ?? 200).end();
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  queue = createQueue(name, { connection: redis });
  app = await createIntakeServer({
    queues: new Map([[name, queue]]),
    ready: async () => true,
    metrics: new RequeueMetrics(),
    maxBodyBytes: 1 << 20,
    logger,
  });
  await registerAdmin(app, {
    queues: [{ name, kind: 'webhook', queue, breaker: parseBreakerOptions({}), budget: undefined }],
    redis,
    access: { kind: 'loopback' },
    host: '127.0.0.1',
    redactHeaders: [],
    logger,
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.address() as AddressInfo;
  url = `http://127.0.0.1:${address.port}/admin/queues/${name}`;
  worker = createWebhookWorker(name, {
    connection: redis,
    allowPrivate: true,
    breaker: false,
    adaptiveConcurrency: false,
    policy: { strategy: 'fixed', baseMs: 3_600_000, capMs: 3_600_000, maxAttempts: 3 },
  });
  events = new WorkerEventLog(worker);
  await worker.waitUntilReady();
});

afterAll(async () => {
  await worker.close({ timeoutMs: 2_000 });
  await app.close();
  await queue.close();
  await new Promise((resolve) => receiver.close(resolve));
  await cleanQueue(redis, name);
  redis.disconnect();
});

const send = (endpoint: string, path: string, id: string) =>
  enqueueWebhook(queue, {
    endpoint: {
      id: endpoint,
      url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}${path}`,
    },
    event: { id, type: 'order.paid', payload: { id } },
  });

async function post(path: string, body: unknown) {
  const res = await fetch(url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('admin API: resend, recover, retry-now', () => {
  it('resends a delivered message (202), and answers 404 naming one never delivered', async () => {
    const job = await send('ep-ok', '/ok', 'm-ok');
    await events.waitFor('job:completed', (e) => e.jobId === job.id);
    const resent = await post('/endpoints/ep-ok/resend', { message: 'm-ok' });
    expect(resent).toMatchObject({ status: 202, body: { endpointId: 'ep-ok', resend: 1 } });
    await events.waitFor('job:completed', (e) => e.jobId === resent.body.deliveryId);
    const none = await post('/endpoints/ep-ok/resend', { message: 'm-none' });
    expect(none.status).toBe(404);
    expect(String(none.body.error)).toMatch(/m-none/);
  });

  it('counts by a dry run, starts a recovery (202) whose progress is readable, refuses a bad time', async () => {
    for (const id of ['d1', 'd2', 'd3']) await send('ep-down', '/down', id);
    await events.waitForCount('job:dead-lettered', 3);
    expect(await post('/endpoints/ep-down/recover', { since: '0', dryRun: true })).toMatchObject({
      status: 200,
      body: { dryRun: true, count: 3 },
    });
    const started = await post('/endpoints/ep-down/recover', { since: '0' });
    expect(started).toMatchObject({ status: 202, body: { started: true } });
    await vi.waitFor(async () => {
      const res = await fetch(`${url}/endpoints/ep-down/recover`);
      expect(await res.json()).toMatchObject({ finished: true, done: 3, total: 3, error: null });
    });
    await events.waitForCount('job:completed', 5);
    const bad = await post('/endpoints/ep-down/recover', { since: 'yesterday' });
    expect(bad.status).toBe(400);
    expect(String(bad.body.error)).toMatch(/since/);
  });

  it('runs a scheduled retry now only at the attempt seen: 409 for a stale one', async () => {
    const job = await send('ep-later', '/later', 'm-later');
    await events.waitFor('retry:scheduled', (e) => e.jobId === job.id);
    const stale = await post(`/deliveries/${encodeURIComponent(job.id)}/retry-now`, {
      attemptsStarted: 0,
    });
    expect(stale).toMatchObject({ status: 409, body: { result: 'attempt-moved-on' } });
    const moved = await post(`/deliveries/${encodeURIComponent(job.id)}/retry-now`, {
      attemptsStarted: 1,
    });
    expect(moved).toMatchObject({ status: 200, body: { result: 'moved', id: job.id } });
    await events.waitFor('job:completed', (e) => e.jobId === job.id);
  });
});
