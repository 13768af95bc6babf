import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { deliveryLogKeys } from '../../src/redis/keys.js';
import { createQueue, type RequeueQueue } from '../../src/scheduler/queue.js';
import { ManualClock } from '../../src/util/fake-clock.js';
import { DeliveryLog, type NewDeliveryLogEntry } from '../../workers/webhook/delivery-log.js';
import {
  createWebhookWorker,
  enqueueWebhook,
  type WebhookWorker,
} from '../../workers/webhook/webhook-worker.js';
import { onCleanup } from '../harness/cleanup.js';
import { cleanedQueueName, connect, redisUrl, type RedisClient } from '../harness/redis.js';
import { WorkerEventLog } from '../harness/worker-events.js';

/**
 * Issue 24, item 6: every attempt of every message to every endpoint is in
 * the delivery log, searchable, redacted, size-capped, written after the
 * move (a failing write changes nothing) and dropped on time by a
 * fleet-wide retention pass.
 */

const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const apiKey = 'ak-K3ymark-dlog-apikey';
const policy = { strategy: 'fixed', baseMs: 30, capMs: 30, maxAttempts: 2 } as const;

let receiver: Server;
let redis: RedisClient;
const calls = new Map<string, number>();

beforeAll(async () => {
  redis = connect();
  receiver = createServer((req, res) => {
    const n = (calls.get(req.url!) ?? 0) + 1;
    calls.set(req.url!, n);
    req.resume();
    // Echoes what it was sent: the signature and the API key must not reach the log.
    const echo = `sig=${String(req.headers['webhook-signature'])} key=${String(req.headers['x-api-key'])}`;
    if (req.url === '/flaky' && n === 1) return void res.writeHead(503).end(echo);
    if (req.url === '/bad') return void res.writeHead(400).end(`nope ${echo} ${'x'.repeat(5_000)}`);
    res.writeHead(200).end('thanks');
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
});

afterAll(async () => {
  receiver.close();
  redis.disconnect();
});

const base = () => `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;

async function startWorker(
  name: string,
  options: Parameters<typeof createWebhookWorker>[1] = {},
): Promise<{ queue: RequeueQueue; worker: WebhookWorker; events: WorkerEventLog }> {
  const queue = createQueue(name, { connection: redisUrl(), policy });
  const worker = createWebhookWorker(name, {
    connection: redisUrl(),
    allowPrivate: true,
    breaker: false,
    adaptiveConcurrency: false,
    redactHeaders: ['x-api-key'],
    ...options,
  });
  const events = new WorkerEventLog(worker);
  onCleanup(async () => {
    await worker.close();
    await queue.close();
  });
  await worker.waitUntilReady();
  return { queue, worker, events };
}

function send(
  queue: RequeueQueue,
  endpoint: string,
  path: string,
  id: string,
  type = 'order.paid',
) {
  return enqueueWebhook(queue, {
    endpoint: { id: endpoint, url: `${base()}${path}`, secret },
    event: { id, type, payload: { id } },
    headers: { 'X-Api-Key': apiKey },
  });
}

describe('delivery log', () => {
  it('keeps every attempt with status, latency and a redacted, capped excerpt; searchable by message, endpoint, type and status', async () => {
    const name = cleanedQueueName(redis, 'dlog');
    const { queue, worker, events } = await startWorker(name);
    await send(queue, 'ep-flaky', '/flaky', 'msg-1');
    await send(queue, 'ep-ok', '/ok', 'msg-2', 'user.created');
    await send(queue, 'ep-bad', '/bad', 'msg-3');
    await events.waitForCount('job:completed', 2);
    await events.waitFor('job:dead-lettered');
    const log = worker.deliveryLog!.log;
    await vi.waitFor(async () => expect((await log.search({})).entries).toHaveLength(4));

    const flaky = (await log.search({ messageId: 'msg-1' })).entries;
    expect(flaky.map((e) => [e.attempt, e.outcome, e.status])).toEqual([
      [2, 'delivered', 200],
      [1, 'retrying', 503],
    ]);
    expect(flaky[1]).toMatchObject({
      endpointId: 'ep-flaky',
      eventType: 'order.paid',
      reason: 'http-status',
    });
    expect(flaky[1]!.retryAt).toBeGreaterThan(flaky[1]!.at);
    expect(flaky[0]!.excerpt).toBe('thanks');
    for (const e of flaky) expect(e.latencyMs).toBeGreaterThanOrEqual(0);

    const [dead] = (await log.search({ endpointId: 'ep-bad' })).entries;
    expect(dead).toMatchObject({ outcome: 'dead', status: 400, deadReason: 'permanent-error' });
    expect(Buffer.byteLength(dead!.excerpt!)).toBeLessThanOrEqual(256);

    const stored = JSON.stringify(await log.search({}));
    expect(stored).toContain('sig=');
    expect(stored).not.toContain(apiKey);
    expect(stored).not.toMatch(/v1,[A-Za-z0-9+/=]{20,}/);

    const ids = async (q: Parameters<DeliveryLog['search']>[0]) =>
      (await log.search(q)).entries.map((e) => `${e.messageId}#${e.attempt}`);
    expect(await ids({ eventType: 'user.created' })).toEqual(['msg-2#1']);
    expect((await ids({ status: '5xx' })).sort()).toEqual(['msg-1#1']);
    expect((await ids({ status: '4xx' })).sort()).toEqual(['msg-3#1']);
    expect((await ids({ status: '200' })).sort()).toEqual(['msg-1#2', 'msg-2#1']);
    expect(await ids({ outcome: 'dead' })).toEqual(['msg-3#1']);
    expect(await ids({ messageId: 'msg-1', status: '503' })).toEqual(['msg-1#1']);

    // Pages: one at a time, newest first, a cursor to go on.
    const first = await log.search({}, { limit: 3 });
    const rest = await log.search({}, { limit: 3, cursor: first.next! });
    expect(first.entries).toHaveLength(3);
    expect(rest.entries).toHaveLength(1);
    expect(rest.next).toBeNull();
    const all = [...first.entries, ...rest.entries].map((e) => e.id);
    expect(new Set(all).size).toBe(4);
  });

  it('a log write that fails changes no delivery (regression: the log must sit after the move)', async () => {
    const name = cleanedQueueName(redis, 'dlog-broken');
    // A connection to a port nothing listens on, failing each command at once.
    const broken = new Redis({
      port: 1,
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    broken.on('error', () => {});
    onCleanup(() => broken.disconnect());
    const { queue, worker, events } = await startWorker(name, {
      logger: { level: 'silent' },
      deliveryLog: new DeliveryLog(broken, name),
    });
    await send(queue, 'ep-a', '/ok', 'broken-1');
    await send(queue, 'ep-b', '/flaky-b', 'broken-2');
    await events.waitForCount('job:completed', 2);
    await vi.waitFor(() => expect(worker.deliveryLog!.failedWrites).toBe(2));
    expect(events.all('job:dead-lettered')).toHaveLength(0);
  });

  it('retention drops entries and every index on time, one pass at a time for the fleet', async () => {
    const name = cleanedQueueName(redis, 'dlog-retention');
    const clock = new ManualClock(Date.UTC(2026, 10, 1));
    const day = 24 * 3600 * 1000;
    const log = new DeliveryLog(redis, name, { retentionMs: day }, { clock });
    const entry = (i: number, at: number): NewDeliveryLogEntry => ({
      at,
      messageId: `m-${i}`,
      eventType: 't',
      endpointId: `ep-${i % 3}`,
      jobId: `j-${i}`,
      attempt: 1,
      outcome: 'delivered',
      status: 200,
      latencyMs: 5,
    });
    for (let i = 0; i < 1_200; i++) await log.write(entry(i, clock.now() - 2 * day));
    await log.write(entry(9_999, clock.now()));
    const keys = deliveryLogKeys(name);

    // Another pass holds the lock: nothing is touched.
    await redis.set(keys.trimLock, 'someone-else', 'PX', 60_000);
    expect(await log.retentionPass()).toMatchObject({ kind: 'busy' });
    expect(await redis.zcard(keys.index)).toBe(1_201);
    await redis.del(keys.trimLock);

    expect(await log.retentionPass()).toEqual({
      kind: 'done',
      removed: { byAge: 1_200, byCount: 0 },
    });
    expect(await redis.zrange(keys.index, 0, -1)).toHaveLength(1);
    expect(await redis.exists(keys.byMessage('m-1'), keys.byEndpoint('ep-1'))).toBe(0);
    expect(await redis.exists(keys.byEndpoint('ep-0'))).toBe(1);
    expect(await redis.exists(keys.trimLock)).toBe(0);
    expect((await log.search({})).entries.map((e) => e.messageId)).toEqual(['m-9999']);
  });

  it('costs one MULTI of 7 commands and a stated number of bytes per attempt', async () => {
    const name = cleanedQueueName(redis, 'dlog-cost');
    const log = new DeliveryLog(redis, name);
    const n = 1_000;
    for (let i = 0; i < n; i++)
      await log.write({
        at: Date.now(),
        messageId: `msg_2Xk${String(i).padStart(8, '0')}`,
        eventType: 'invoice.paid',
        endpointId: `ep_${String(i % 100).padStart(6, '0')}`,
        jobId: `%7Eep_${i}/msg_${i}`,
        attempt: 1,
        outcome: 'retrying',
        status: 503,
        reason: 'http-status',
        latencyMs: 42,
        excerpt: 'e'.repeat(256),
        error: 'POST http://127.0.0.1:1 answered 503 Service Unavailable',
        retryAt: Date.now() + 5_000,
      });
    const keys = deliveryLogKeys(name);
    let bytes = 0;
    for (const key of await redis.keys(`${keys.index}*`))
      bytes += (await redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) as number;
    const perEntry = bytes / n;
    console.log(`delivery log: ${perEntry.toFixed(0)} bytes per entry (256-byte excerpt)`);
    // Stated in docs/SERVICE.md: at most 1,200 bytes per attempt with a full 256-byte excerpt.
    expect(perEntry).toBeLessThan(1_200);
  });
});
