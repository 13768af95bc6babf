/**
 * Issue 22 item 3: a breaker that tells flaky from down. The webhook worker
 * with its default breaker against real receivers on loopback, and two
 * worker processes against a dependency failing every call, on a real Redis.
 */
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { freePort } from '../../src/redis/redis-server.js';
import { requeueKeys } from '../../src/redis/keys.js';
import { createQueue } from '../../src/scheduler/queue.js';
import { queueBreakerKey } from '../../src/scheduler/requeue-worker.js';
import {
  createWebhookWorker,
  enqueueWebhook,
  webhookBreakerDefaults,
  type WebhookWorkerOptions,
} from '../../workers/webhook/index.js';
import { startDependency } from '../fixtures/breaker-dependency.js';
import { startFleet } from '../fixtures/breaker-fleet.js';
import { onCleanup } from '../harness/cleanup.js';
import {
  cleanQueue,
  cleanedQueueName,
  connect,
  redisUrl,
  uniqueQueueName,
} from '../harness/redis.js';

const admin = connect();
afterAll(() => admin.disconnect());
const logger = createLogger({ level: 'silent' });

interface Receiver {
  url: string;
  /** Arrival time of every request. */
  arrivals: number[];
  /** Events answered 2xx. */
  delivered: Set<string>;
  /** Requests per event. */
  events: Map<string, number>;
}

/** A receiver answering an event's n-th request as `answer` says ('hang': never). */
async function receiver(answer: (nth: number) => number | 'hang'): Promise<Receiver> {
  const seen = new Map<string, number>();
  const r: Receiver = { url: '', arrivals: [], delivered: new Set(), events: seen };
  const server = createServer((req, res: ServerResponse) => {
    const eventId = String(req.headers['webhook-id']);
    const nth = (seen.get(eventId) ?? 0) + 1;
    seen.set(eventId, nth);
    r.arrivals.push(Date.now());
    req.resume();
    req.on('end', () => {
      const status = answer(nth);
      if (status === 'hang') return;
      if (status < 300) r.delivered.add(eventId);
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onCleanup(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  r.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  return r;
}

/** A webhook worker with its defaults (but `options`), its queue and the transitions it heard. */
function webhookWorker(options: WebhookWorkerOptions = {}) {
  const name = uniqueQueueName('brk-flaky');
  const queue = createQueue(name, { connection: redisUrl() });
  const worker = createWebhookWorker(name, {
    connection: redisUrl(),
    allowPrivate: true,
    logger,
    // The breaker's defaults under the library's quick retries (full jitter, 1–30 s): the
    // webhook schedule's first step alone is 5 s, and these tests time the breaker, not it.
    policy: {},
    ...options,
  });
  const transitions: { at: number; name: string; trips?: number }[] = [];
  worker.on('breaker:opened', () => transitions.push({ at: Date.now(), name: 'opened' }));
  worker.on('breaker:half-open', () => transitions.push({ at: Date.now(), name: 'half-open' }));
  worker.on('breaker:closed', () => transitions.push({ at: Date.now(), name: 'closed' }));
  onCleanup(async () => {
    await worker.close({ timeoutMs: 2_000 });
    await queue.close();
    await cleanQueue(admin, name);
  });
  const send = (url: string, count: number) =>
    Promise.all(
      Array.from({ length: count }, (_, i) =>
        enqueueWebhook(queue, {
          endpoint: { id: 'ep', url },
          event: { id: `e-${i}`, type: 'test.flaky', payload: { i } },
        }),
      ),
    );
  return { name, queue, worker, transitions, send };
}

async function until(check: () => boolean, what: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Requests an endpoint received from `openedAt` + a grace (the attempts
 * already in flight) until now, against the bound: 3 per half-open period.
 */
function afterOpening(r: Receiver, transitions: { at: number; name: string }[], graceMs = 250) {
  const openedAt = transitions.find((t) => t.name === 'opened')!.at;
  return {
    requests: r.arrivals.filter((at) => at > openedAt + graceMs).length,
    halfOpenPeriods: transitions.filter((t) => t.name === 'half-open').length,
  };
}

describe('a breaker that tells flaky from down (webhook worker defaults)', () => {
  it(
    'a flaky endpoint whose retries succeed is not cut off: 300 events, each 503 first and 200 on retry, all delivered within 60 s',
    { timeout: 90_000 },
    async () => {
      const r = await receiver((nth) => (nth === 1 ? 503 : 200));
      const w = webhookWorker();
      await w.worker.waitUntilReady();
      const start = Date.now();
      await w.send(r.url, 300);
      await until(
        () => r.delivered.size === 300,
        `300 deliveries (${r.delivered.size} so far)`,
        60_000,
      );
      const tookMs = Date.now() - start;
      console.info(
        `[flaky endpoint] 300/300 in ${tookMs} ms, ${r.arrivals.length} requests, ` +
          `transitions: ${w.transitions.map((t) => t.name).join(' → ') || 'none'}`,
      );
      // If it opened (its first 10 first tries look like an outage), its first
      // half-open period — probed by retries, which succeed — closed it.
      expect(w.transitions.map((t) => t.name).join(' ')).not.toMatch(/half-open opened/);
      expect((await w.queue.counts()).dead).toBe(0);
    },
  );

  it.each([
    ['answers 503 to everything', 'status'],
    ['refuses connections', 'refused'],
  ] as const)(
    'an endpoint that %s opens after minimumRequests and gets at most 3 requests per half-open period',
    { timeout: 60_000 },
    async (_label, kind) => {
      const r = kind === 'status' ? await receiver(() => 503) : undefined;
      const url = r?.url ?? `http://127.0.0.1:${await freePort()}/hook`;
      const w = webhookWorker();
      await w.worker.waitUntilReady();
      await w.send(url, 200);
      await until(
        () => w.transitions.some((t) => t.name === 'opened'),
        'the breaker to open',
        20_000,
      );
      if (r) {
        // Opened on time: minimumRequests plus the bulkhead's attempts in flight.
        await delay(250);
        const openedAt = w.transitions.find((t) => t.name === 'opened')!.at;
        const before = r.arrivals.filter((at) => at <= openedAt + 250).length;
        expect(before).toBeLessThanOrEqual(webhookBreakerDefaults.minimumRequests + 4);
      }
      // Two half-open periods (5 s, then 10 s after the reopening).
      await until(
        () => w.transitions.filter((t) => t.name === 'opened').length >= 3,
        'two failed half-open periods',
        30_000,
      );
      if (r) {
        const seen = afterOpening(r, w.transitions);
        console.info(
          `[down endpoint] ${seen.requests} requests over ${seen.halfOpenPeriods} half-open periods`,
        );
        expect(seen.requests).toBeLessThanOrEqual(3 * seen.halfOpenPeriods);
      }
      const raw = await admin.hget(requeueKeys(w.name).breaker('ep'), 's');
      const state = JSON.parse(raw!) as {
        phase: string;
        trips: number;
        halfOpenAt: number;
        openedAt: number;
      };
      expect(state.phase).toBe('open');
      // The open time doubles while it keeps failing: 5 s, 10 s, 20 s.
      expect(state.halfOpenAt - state.openedAt).toBe(20_000);
      expect((await w.queue.counts()).dead).toBe(0);
    },
  );

  it('a slow endpoint (every attempt times out) opens', { timeout: 60_000 }, async () => {
    const r = await receiver(() => 'hang');
    // A short attempt timeout keeps the test short; the defaults' 15 s reach
    // 20 timed-out events within the 90 s window too (5 rounds of the bulkhead's 4).
    const w = webhookWorker({ timeoutMs: 300 });
    await w.worker.waitUntilReady();
    await w.send(r.url, 60);
    await until(
      () => w.transitions.some((t) => t.name === 'opened'),
      'the breaker to open',
      20_000,
    );
    // Opened on time: minimumRequests events plus the bulkhead's 4 in flight
    // (retries of events already counted may call too: they add nothing).
    expect(r.events.size).toBeGreaterThanOrEqual(webhookBreakerDefaults.minimumRequests);
    expect(r.events.size).toBeLessThanOrEqual(webhookBreakerDefaults.minimumRequests + 4);
  });
});

describe('the breaker opens on time in a burst', () => {
  it(
    'two worker processes (concurrency 10) failing every call at once stop within minimumRequests + the calls in flight',
    { timeout: 60_000 },
    async () => {
      const name = cleanedQueueName(admin, 'brk-burst');
      const dep = await startDependency();
      onCleanup(() => dep.close());
      dep.fail();
      const fleet = await startFleet(2, {
        REDIS_URL: redisUrl(),
        QUEUE: name,
        DEPENDENCY_URL: dep.url,
        BREAKER: JSON.stringify({ minimumRequests: 10 }),
        CONCURRENCY: '10',
      });
      onCleanup(async () => {
        await Promise.all(fleet.map((w) => w.stop()));
      });
      const queue = createQueue<{ i: number }>(name, { connection: redisUrl() });
      onCleanup(() => queue.close());
      await queue.addBulk(Array.from({ length: 300 }, (_, i) => ({ name: 'call', data: { i } })));
      await Promise.race(
        fleet.map((w) => w.waitForEvent((e) => e.name === 'breaker:opened', 20_000)),
      );
      // Whatever was in flight lands; nothing new starts while open (openMs 30 s).
      await delay(1_500);
      const raw = await admin.hget(requeueKeys(name).breaker(queueBreakerKey), 's');
      expect(JSON.parse(raw!)).toMatchObject({ phase: 'open', trips: 1 });
      console.info(
        `[burst] ${dep.count()} calls before the fleet stopped (bound 10 + 20 in flight)`,
      );
      expect(dep.count()).toBeLessThanOrEqual(10 + 2 * 10);
    },
  );
});
