/**
 * Issue 13: no endpoint can slow the others down. Real receivers on
 * loopback, the webhook worker with its default settings (breaker on,
 * bulkhead a quarter of the slots), a real Redis.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { PauseStore } from '../../src/redis/pause-store.js';
import { createQueue } from '../../src/scheduler/queue.js';
import { parseJobState } from '../../src/policy/job-state.js';
import {
  createWebhookWorker,
  enqueueWebhook,
  type WebhookWorkerOptions,
} from '../../workers/webhook/index.js';
import { onCleanup } from '../harness/cleanup.js';
import { cli } from '../harness/cli.js';
import { cleanQueue, connect, jobKey, redisUrl, uniqueQueueName } from '../harness/redis.js';
import { until, webhookTestQueue } from '../harness/webhook.js';

const admin = connect();
afterAll(() => admin.disconnect());
const logger = createLogger({ level: 'silent' });

type Behaviour = (res: ServerResponse, nth: number, eventId: string) => void;

interface Receiver {
  url: string;
  /** Arrival times of each event's requests, by event id. */
  arrivals: Map<string, number[]>;
  /** Deliveries answered 2xx, by event id. */
  delivered: Map<string, number>;
}

/** A receiver whose answer to the n-th request of an event is `behave`'s. */
async function receiver(behave: Behaviour): Promise<Receiver> {
  const arrivals = new Map<string, number[]>();
  const delivered = new Map<string, number>();
  const server = createServer((req, res) => {
    const eventId = String(req.headers['webhook-id']);
    const seen = arrivals.get(eventId) ?? [];
    seen.push(Date.now());
    arrivals.set(eventId, seen);
    req.resume();
    req.on('end', () => {
      const originalWriteHead = res.writeHead.bind(res);
      res.writeHead = ((status: number, ...rest: unknown[]) => {
        if (status >= 200 && status < 300)
          delivered.set(eventId, (delivered.get(eventId) ?? 0) + 1);
        return (originalWriteHead as (...a: unknown[]) => ServerResponse)(status, ...rest);
      }) as typeof res.writeHead;
      behave(res, seen.length, eventId);
    });
  });
  server.keepAliveTimeout = 1;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onCleanup(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/hook`, arrivals, delivered };
}

const setup = (options: WebhookWorkerOptions = {}) => webhookTestQueue(admin, 'isolation', options);

function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

describe('webhook delivery that no endpoint can slow down', () => {
  it(
    'an endpoint that never answers does not delay healthy endpoints past 2 s at p99',
    { timeout: 60_000 },
    async () => {
      const hanging = await receiver(() => undefined);
      const healthy = await receiver((res) => res.writeHead(204).end());
      const t = setup();
      await t.worker.waitUntilReady();
      const enqueuedAt = new Map<string, number>();
      // The hanging endpoint's deliveries go first, then the healthy ones, interleaved after.
      for (let i = 0; i < 40; i += 1) await t.enqueue('stuck', hanging.url, `stuck-${i}`);
      for (let i = 0; i < 200; i += 1) {
        const id = `ok-${i}`;
        enqueuedAt.set(id, Date.now());
        await t.enqueue(`healthy-${i % 4}`, healthy.url, id);
      }
      await until(() => healthy.delivered.size === 200, 30_000, 'the healthy deliveries');
      const latencies = [...enqueuedAt].map(([id, at]) => healthy.arrivals.get(id)![0]! - at);
      const p99 = quantile(latencies, 0.99);
      console.log(`[isolation] healthy p99 ${p99} ms, p50 ${quantile(latencies, 0.5)} ms`);
      expect(p99).toBeLessThan(2_000);
      // The hanging endpoint held at most its bulkhead's share: a quarter of 16.
      expect(hanging.arrivals.size).toBeLessThanOrEqual(4);
    },
  );

  it(
    '1,000 deliveries to receivers that fail 1–3 times first (503, or 429 with Retry-After: 1) all arrive within 60 s, each once',
    { timeout: 90_000 },
    async () => {
      // Each event fails (its number mod 4) times, alternately 503 and 429 + Retry-After: 1.
      const flaky = await receiver((res, nth, eventId) => {
        const n = Number(eventId.split('-')[1]);
        const failures = 1 + (n % 3);
        if (n % 5 === 0 || nth > failures) return res.writeHead(200).end('ok');
        if (n % 2 === 0) return res.writeHead(429, { 'retry-after': '1' }).end();
        return res.writeHead(503).end();
      });
      const t = setup({
        policy: { strategy: 'full-jitter', baseMs: 500, capMs: 4_000, maxAttempts: 6 },
      });
      await t.worker.waitUntilReady();
      const deferrals = { pause: 0, bulkhead: 0, breaker: 0, 'rate-limit': 0 };
      t.worker.on('job:deferred', (e) => (deferrals[e.reason] += 1));
      const started = Date.now();
      // 100 receivers, 10 deliveries each: each 429 holds back its delivery for a second.
      // Enqueued 50 at a time (the adds are pipelined on one connection).
      for (let i = 0; i < 1_000; i += 50)
        await Promise.all(
          Array.from({ length: 50 }, (_, j) =>
            t.enqueue(`flaky-${(i + j) % 100}`, flaky.url, `evt-${i + j}`),
          ),
        );
      const enqueuedMs = Date.now() - started;
      await until(() => flaky.delivered.size === 1_000, 60_000, 'every delivery');
      const tookMs = Date.now() - started;
      console.log(
        `[flaky] 1,000 deliveries in ${tookMs} ms (enqueued in ${enqueuedMs} ms); ` +
          `deferrals ${JSON.stringify(deferrals)}`,
      );
      expect(tookMs).toBeLessThan(60_000);
      // Rate limiting is not the endpoint being down: no circuit opened.
      expect(deferrals.breaker).toBe(0);
      expect([...flaky.delivered.values()].every((n) => n === 1)).toBe(true);
      expect(await t.queue.counts()).toMatchObject({ failed: 0, dead: 0 });
    },
  );

  it('a 2xx whose body arrives slowly completes on its first attempt, and is in the history', async () => {
    const slowBody = await receiver((res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('accepted');
      // The rest of the body never comes before the attempt's deadline.
      setTimeout(() => res.end(' …finally'), 5_000).unref();
    });
    const t = setup({ timeoutMs: 1_000, bodyTimeoutMs: 200 });
    const done = new Promise<{ jobId: string; attempt: number }>((resolve) =>
      t.worker.on('job:completed', (e) => resolve(e)),
    );
    const { id } = await t.enqueue('slow', slowBody.url, 'evt-slow');
    const completed = await done;
    expect(completed).toMatchObject({ jobId: id, attempt: 1 });
    expect(slowBody.arrivals.get('evt-slow')).toHaveLength(1);
    const state = parseJobState(await admin.hget(jobKey(admin, t.name, id), 'rq'));
    expect(state?.history).toEqual([
      expect.objectContaining({
        attempt: 1,
        outcome: 'succeeded',
        decision: 'completed',
        details: expect.objectContaining({ status: 200, body: 'accepted' }),
      }),
    ]);
  });

  it('a 429 whose Retry-After reaches pauseRetryAfterMs pauses the whole endpoint, fleet-wide, and does not trip its breaker', async () => {
    const limited = await receiver((res, nth, eventId) => {
      if (eventId === 'evt-0' && nth === 1) return res.writeHead(429, { 'retry-after': '4' }).end();
      return res.writeHead(200).end();
    });
    // 4 s stands for the default 30 s; a shorter Retry-After holds back only its own delivery (webhook-throttle.test.ts).
    const t = setup({ concurrency: 1, adaptiveConcurrency: { pauseRetryAfterMs: 4_000 } });
    await t.worker.waitUntilReady();
    const first = await t.enqueue('rate-limited', limited.url, 'evt-0');
    await until(() => (limited.arrivals.get('evt-0')?.length ?? 0) === 1, 10_000, 'the 429');
    const limitedAt = limited.arrivals.get('evt-0')![0]!;
    // The endpoint's other deliveries wait for the pause too, not only the job that got the 429.
    for (let i = 1; i <= 3; i += 1) await t.enqueue('rate-limited', limited.url, `evt-${i}`);
    const store = new PauseStore(admin, t.name);
    let pauses = await store.list();
    for (let i = 0; i < 100 && pauses.length === 0; i += 1) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      pauses = await store.list();
    }
    expect(pauses.map((p) => p.key)).toEqual(['rate-limited']);
    expect(pauses[0]!.until).toBeGreaterThanOrEqual(limitedAt + 3_900);
    // `requeue breaker status` says which keys are paused and until when.
    const status = await cli('breaker', 'status', t.name, '--json');
    expect(status.code).toBe(0);
    expect(JSON.parse(status.stdout).paused).toEqual([
      { key: 'rate-limited', until: new Date(pauses[0]!.until).toISOString() },
    ]);
    await until(() => limited.delivered.size === 4, 20_000, 'every delivery');
    for (const id of ['evt-1', 'evt-2', 'evt-3'])
      expect(limited.arrivals.get(id)![0]! - limitedAt).toBeGreaterThanOrEqual(3_900);
    expect(await t.worker.gate.stateOf('rate-limited')).toBeUndefined();
    expect((await t.queue.bull.getJob(first.id))?.finishedOn).toBeDefined();
  });
  it(
    "a SIGKILLed webhook worker's in-flight deliveries are delivered by another worker within 20 s",
    { timeout: 60_000 },
    async () => {
      // Each event's first request is held unanswered (the worker is busy with it when it dies);
      // later ones get a 200.
      const held = await receiver((res, nth) => {
        if (nth > 1) res.writeHead(200).end();
      });
      const name = uniqueQueueName('isolation-kill');
      const queue = createQueue(name, { connection: redisUrl() });
      onCleanup(async () => {
        await queue.close();
        await cleanQueue(admin, name);
      });
      // The standalone worker with its defaults (lock 10 s renewed every 5 s, stalled check every 5 s).
      const child = spawn(process.execPath, ['--import', 'tsx', 'workers/webhook/main.ts'], {
        env: {
          ...process.env,
          REDIS_URL: redisUrl(),
          WEBHOOK_QUEUE: name,
          WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
          LOG_LEVEL: 'info',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const exited = once(child, 'exit');
      onCleanup(() => void child.kill('SIGKILL'));
      let output = '';
      await new Promise<void>((resolve, reject) => {
        child.stdout.on('data', (chunk: Buffer) => {
          output += chunk.toString();
          if (output.includes('webhook worker started')) resolve();
        });
        child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
        void exited.then(() => reject(new Error(`the worker exited: ${output}`)));
      });
      const events = ['evt-0', 'evt-1', 'evt-2', 'evt-3'];
      for (const [i, eventId] of events.entries())
        await enqueueWebhook(queue, {
          endpoint: { id: `ep-${i}`, url: held.url },
          event: { id: eventId, type: 'test', payload: { i } },
        });
      await until(() => held.arrivals.size === events.length, 20_000, 'every first request');
      child.kill('SIGKILL');
      await exited;
      const killedAt = Date.now();
      // A survivor with the same defaults, started at once, finds the dead worker's jobs.
      const survivor = createWebhookWorker(name, {
        connection: redisUrl(),
        allowPrivate: true,
        logger,
      });
      onCleanup(() => survivor.close({ timeoutMs: 2_000 }));
      await until(() => held.delivered.size === events.length, 30_000, 'every delivery');
      const recoveredMs = Math.max(...events.map((id) => held.arrivals.get(id)![1]!)) - killedAt;
      console.log(`[kill] 4 in-flight deliveries of a SIGKILLed worker back in ${recoveredMs} ms`);
      expect(recoveredMs).toBeLessThan(20_000);
      expect(events.map((id) => held.arrivals.get(id)!.length)).toEqual([2, 2, 2, 2]);
      expect(await queue.counts()).toMatchObject({ failed: 0, dead: 0 });
    },
  );
});
