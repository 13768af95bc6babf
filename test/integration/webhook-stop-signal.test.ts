import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WorkerEvents } from '../../src/scheduler/events.js';
import { DeadLetterQueue } from '../../src/scheduler/dlq/dead-letter-queue.js';
import { createQueue } from '../../src/scheduler/queue.js';
import {
  createEndpoint,
  createWebhookWorker,
  EndpointRegistry,
  EndpointStore,
  recoverEndpoint,
  sendMessage,
} from '../../workers/webhook/index.js';
import { onCleanup } from '../harness/cleanup.js';
import { cleanedQueueName, connect, type RedisClient } from '../harness/redis.js';
import { WorkerEventLog } from '../harness/worker-events.js';

/**
 * Issue 24, item 4: the receiver's explicit "stop". The Standard Webhooks
 * spec (1.0.0, "Delivery success and failure") names one: `410 Gone` — "the
 * server is no longer interested in receiving webhooks from this source.
 * Sender should disable the webhook endpoint, and stop sending it messages."
 * Its other answers are not a stop: a 3xx is a failure (redirects not
 * followed; update the URL), 429, 502 and 504 ask for throttling, `Retry-After`
 * for a later attempt. Against a real loopback receiver and real Redis.
 */

let receiver: Server;
let redis: RedisClient;
const hits: string[] = [];
let goneAnswers = true;

beforeAll(async () => {
  redis = connect();
  receiver = createServer((req, res) => {
    req.resume();
    hits.push(`${req.url} ${String(req.headers['webhook-id'])}`);
    if (req.url === '/gone' && goneAnswers) return void res.writeHead(410).end('unsubscribed');
    if (req.url === '/moved') return void res.writeHead(308, { location: '/elsewhere' }).end();
    if (req.url === '/busy') return void res.writeHead(hits.length % 2 ? 502 : 504).end();
    res.writeHead(200).end();
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
});

afterAll(async () => {
  await new Promise((resolve) => receiver.close(resolve));
  redis.disconnect();
});

describe('the receiver’s explicit stop (410 Gone)', () => {
  it('disables the endpoint at once, sends it nothing more — new messages not fanned out to it, deliveries already bound for it not sent — and recover brings them back once it is enabled', async () => {
    const name = cleanedQueueName(redis, 'stop-signal');
    const base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
    const queue = createQueue(name, { connection: redis });
    const registry = new EndpointRegistry({ connection: redis, cacheTtlMs: 0 });
    const disabled = new EndpointStore({ connection: redis, cacheTtlMs: 0 });
    const told: WorkerEvents['endpoint:disabled'][0][] = [];
    const worker = createWebhookWorker(name, {
      connection: redis,
      allowPrivate: true,
      breaker: false,
      adaptiveConcurrency: false,
      logger: { level: 'silent' },
      registry,
      concurrency: 1,
      policy: { strategy: 'fixed', baseMs: 50, capMs: 50, maxAttempts: 1_000 },
      onEndpointDisabled: (e) => told.push(e),
    });
    const events = new WorkerEventLog(worker);
    onCleanup(async () => {
      await worker.close({ timeoutMs: 2_000 });
      await queue.close();
      await registry.close();
      await disabled.close();
    });
    for (const [id, path] of [
      ['gone', '/gone'],
      ['moved', '/moved'],
      ['busy', '/busy'],
      ['ok', '/ok'],
    ] as const)
      await createEndpoint(registry, name, id, { url: `${base}${path}` }, { allowPrivate: true });

    const first = await sendMessage(queue, { type: 'a.b', payload: {}, id: 'm1' }, { registry });
    expect(first.endpoints.map((e) => e.endpointId).sort()).toEqual([
      'busy',
      'gone',
      'moved',
      'ok',
    ]);
    const dead = await events.waitFor('job:dead-lettered');
    expect(dead.record).toMatchObject({ reason: 'gone', attempts: 1 });
    expect(told).toEqual([
      expect.objectContaining({
        endpointId: 'gone',
        cause: 'gone',
        reason: expect.stringMatching(/^410 Gone from http:\/\/127\.0\.0\.1:\d+$/),
      }),
    ]);
    expect((await disabled.get(name, 'gone'))?.reason).toMatch(/^410 Gone/);
    // Stop sending it messages: a new message is not fanned out to it...
    const second = await sendMessage(
      queue,
      { type: 'a.b', payload: {}, id: 'm2' },
      { registry, disabled },
    );
    expect(second.endpoints.map((e) => e.endpointId).sort()).toEqual(['busy', 'moved', 'ok']);
    await events.waitFor('job:completed', (e) => e.jobId === '%7Eok/m2');
    // ...and a delivery already bound for it (added before the 410 was known) is not sent:
    // it dead-letters as endpoint-disabled, to be recovered if the receiver comes back.
    const goneHits = () => hits.filter((h) => h.startsWith('/gone ')).length;
    const before = goneHits();
    await queue.add(
      'a.b',
      {
        endpoint: { id: 'gone', url: `${base}/gone`, registered: true },
        event: { id: 'm3', type: 'a.b', payload: {} },
      },
      { idempotencyKey: 'gone/m3', dispatchKey: 'gone', tags: { endpoint: 'gone' } },
    );
    const held = await events.waitFor('job:dead-lettered', (e) => e.jobId === '%7Egone/m3');
    expect(held.record.reason).toBe('endpoint-disabled');
    expect(goneHits()).toBe(before);

    // Not a stop: the redirect and the 502/504s are failures, retried; their endpoints stay enabled.
    await expect
      .poll(() => hits.filter((h) => h.startsWith('/moved ')).length, { timeout: 10_000 })
      .toBeGreaterThanOrEqual(2);
    await expect
      .poll(() => hits.filter((h) => h.startsWith('/busy ')).length, { timeout: 10_000 })
      .toBeGreaterThanOrEqual(2);
    expect(hits.some((h) => h.startsWith('/elsewhere'))).toBe(false);
    expect(await disabled.isDisabled(name, 'moved')).toBe(false);
    expect(await disabled.isDisabled(name, 'busy')).toBe(false);

    // The receiver wants them again: the operator enables it and recovers what it missed.
    goneAnswers = false;
    await disabled.enable(name, 'gone');
    const dlq = new DeadLetterQueue(name, { connection: redis });
    onCleanup(() => dlq.close());
    expect(
      await recoverEndpoint(dlq, 'gone', { since: held.record.deadAt, dryRun: true }),
    ).toMatchObject({ count: 1 });
    await recoverEndpoint(dlq, 'gone', { since: held.record.deadAt });
    await events.waitFor('job:completed', (e) => e.jobId === '%7Egone/m3', 20_000);
    expect(goneHits()).toBe(before + 1);
  }, 60_000);
});
