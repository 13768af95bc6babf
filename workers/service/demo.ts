#!/usr/bin/env node
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ConfigError } from '../../src/config/env.js';
import { createLogger } from '../../src/config/logger.js';
import { createRedis } from '../../src/redis/connection.js';
import { createQueue } from '../../src/scheduler/queue.js';
import { quantile } from '../../src/util/stats.js';
import { systemClock } from '../../src/util/system.js';
import { createWebhookWorker, enqueueWebhook, verifyWebhook } from '../webhook/index.js';
import { rm } from 'node:fs/promises';
import { hasRedisServer, startRedisServer } from '../../src/redis/redis-server.js';

/**
 * `npm run demo`: requeue delivering a few thousand webhooks to a flaky
 * receiver on loopback — 503s, a rate limit answering 429s with Retry-After, an outage of a few
 * seconds, one endpoint answering 410 — with a live progress line and a
 * closing summary. It runs on a private `redis-server` of its own (a free
 * port, a temporary directory, no AOF), never on whatever answers on 6379 or
 * REDIS_URL, and removes it afterwards: it leaves nothing behind.
 */

const deliveries = Number(process.env.DEMO_JOBS ?? 3000);
const outageMs = 4000;
const secret = `whsec_${randomBytes(24).toString('base64')}`;

type Behaviour = 'flaky' | 'rate-limited' | 'outage' | 'gone';
const endpoints: { id: string; behaviour: Behaviour }[] = [
  ...Array.from({ length: 6 }, (_, i) => ({ id: `shop-${i + 1}`, behaviour: 'flaky' as const })),
  { id: 'crm', behaviour: 'rate-limited' },
  { id: 'billing', behaviour: 'outage' },
  { id: 'legacy', behaviour: 'gone' },
];

/** What each dead-letter reason means here. */
const deadReasons: Record<string, string> = {
  gone: 'the 410 endpoint answered "gone" and was disabled',
  'endpoint-disabled': 'later jobs for the disabled endpoint, never sent',
  'max-attempts': 'still failing after 10 attempts',
  'max-deferrals': 'deferred by an open circuit too often',
};

async function main(): Promise<void> {
  const logger = createLogger({ level: process.env.LOG_LEVEL ?? 'silent' });
  const startedAt = systemClock.now();
  const seen = new Map<string, number>();
  const delays: number[] = [];
  let requests = 0;
  let badSignatures = 0;
  /** When the outage endpoint was first asked: its outage runs from then. */
  let outageFrom: number | undefined;
  /** When the rate-limited endpoint accepted its requests of the last second. */
  const crmAccepted: number[] = [];
  const crmPerSecond = 40;

  const receiver = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      requests += 1;
      const body = Buffer.concat(chunks);
      const behaviour = (req.url ?? '').split('/')[2] as Behaviour;
      const now = systemClock.now();
      try {
        verifyWebhook(secret, req.headers, body, { now });
      } catch {
        badSignatures += 1;
        res.writeHead(401).end();
        return;
      }
      const id = String(req.headers['webhook-id']);
      const key = `${req.url}|${id}`;
      if (behaviour === 'gone') return void res.writeHead(410).end('endpoint removed');
      // The outage starts with the endpoint's first request, not with the demo: a slow
      // start (a busy machine) must not use it up before any delivery reaches it.
      if (behaviour === 'outage' && now - (outageFrom ??= now) < outageMs)
        return void res.writeHead(503).end('down');
      if (behaviour === 'rate-limited') {
        // A real rate limit: at most `crmPerSecond` requests a second, then
        // 429 with Retry-After (which pauses the endpoint on every worker).
        while (crmAccepted.length > 0 && now - crmAccepted[0]! >= 1_000) crmAccepted.shift();
        if (crmAccepted.length >= crmPerSecond)
          return void res.writeHead(429, { 'retry-after': '1' }).end('slow down');
        crmAccepted.push(now);
      }
      if (behaviour === 'flaky' && (id.charCodeAt(id.length - 1) + requests) % 5 === 0) {
        return void res.writeHead(503).end('try again');
      }
      if (!seen.has(key)) {
        const { data } = JSON.parse(body.toString()) as { data: { enqueuedAt: number } };
        delays.push(now - data.enqueuedAt);
      }
      seen.set(key, (seen.get(key) ?? 0) + 1);
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const port = (receiver.address() as AddressInfo).port;

  if (!(await hasRedisServer())) {
    throw new ConfigError(
      'the demo runs on a private redis-server of its own, and there is none on PATH: install one ' +
        '(apt-get install redis-server, dnf install redis, brew install redis); it never uses your Redis',
    );
  }
  const redis = await startRedisServer({ appendonly: false });
  // Ended early (an error), the demo must not leave its server running: stop() signals at once.
  process.once('exit', () => void redis.stop());
  const connection = createRedis(redis.url);
  const queueName = `demo-webhooks-${randomBytes(3).toString('hex')}`;
  const queue = createQueue(queueName, { connection });
  const worker = createWebhookWorker(queueName, {
    connection,
    concurrency: 32,
    allowPrivate: true,
    timeoutMs: 2000,
    logger,
    policy: { strategy: 'full-jitter', baseMs: 200, capMs: 2000, maxAttempts: 10 },
    breaker: {
      failureRate: 0.5,
      minimumRequests: 10,
      windowMs: 5000,
      openMs: 1500,
      halfOpenProbes: 1,
    },
  });
  let delivered = 0;
  let retries = 0;
  let trips = 0;
  let deferrals = 0;
  const dead = new Map<string, number>();
  worker.on('job:completed', () => (delivered += 1));
  worker.on('retry:scheduled', () => (retries += 1));
  worker.on('job:deferred', () => (deferrals += 1));
  worker.on('breaker:opened', () => (trips += 1));
  worker.on('job:dead-lettered', (e) =>
    dead.set(e.record.reason, (dead.get(e.record.reason) ?? 0) + 1),
  );
  await worker.waitUntilReady();

  process.stderr.write(
    `requeue demo: ${deliveries} webhook deliveries to ${endpoints.length} endpoints on 127.0.0.1:${port} ` +
      `(Redis: a private redis-server on ${redis.url.replace('redis://', '')}, removed afterwards)\n`,
  );
  const batch = [];
  for (let i = 0; i < deliveries; i += 1) {
    const endpoint = endpoints[i % endpoints.length]!;
    batch.push(
      enqueueWebhook(queue, {
        endpoint: {
          id: endpoint.id,
          url: `http://127.0.0.1:${port}/hooks/${endpoint.behaviour}/${endpoint.id}`,
          secret,
        },
        event: {
          id: `evt_${i}`,
          type: 'order.paid',
          payload: { order: i, enqueuedAt: systemClock.now() },
        },
      }),
    );
  }
  await Promise.all(batch);

  const deadTotal = () => [...dead.values()].reduce((a, b) => a + b, 0);
  const line = () =>
    `\r${((systemClock.now() - startedAt) / 1000).toFixed(1)}s  delivered ${delivered}/${deliveries}  ` +
    `retries ${retries}  deferred ${deferrals}  dead ${deadTotal()}  breaker trips ${trips}   `;
  const deadline = startedAt + 120_000;
  while (delivered + deadTotal() < deliveries && systemClock.now() < deadline) {
    process.stderr.write(line());
    await new Promise((r) => setTimeout(r, 200));
  }
  process.stderr.write(line() + '\n');

  const sorted = [...delays].sort((a, b) => a - b);
  const duplicates = [...seen.values()].filter((n) => n > 1).length;
  const summary = {
    deliveries,
    delivered,
    retries,
    deferredByBreaker: deferrals,
    deadLettered: Object.fromEntries(dead),
    breakerTrips: trips,
    deliveryDelayMs: {
      p50: Math.round(quantile(sorted, 0.5)),
      p99: Math.round(quantile(sorted, 0.99)),
    },
    receiver: { requests, duplicates, badSignatures },
    seconds: Number(((systemClock.now() - startedAt) / 1000).toFixed(1)),
  };
  const deadLines = [...dead].map(
    ([reason, n]) => `${reason} ${n}: ${deadReasons[reason] ?? 'see requeue dlq list'}`,
  );
  process.stdout.write(
    [
      '',
      'summary',
      `  delivered       ${delivered} of ${deliveries}: webhooks the receiver answered 2xx; each exactly once: ${duplicates === 0 ? 'yes (no event was accepted twice)' : `no, ${duplicates} twice`}`,
      `  retries         ${retries}: failed attempts scheduled again (503s, 429s with Retry-After, the outage)`,
      `  deferrals       ${deferrals}: jobs put back unsent (no attempt used) while their endpoint's circuit was open, it was paused by a 429, or it had as many deliveries running as it may`,
      `  dead-lettered   ${deadTotal()}${deadLines.length > 0 ? `: ${deadLines.join('; ')}` : ''}`,
      `  breaker trips   ${trips}: times an endpoint's circuit opened`,
      `  delivery delay  p50 ${summary.deliveryDelayMs.p50} ms, p99 ${summary.deliveryDelayMs.p99} ms: from enqueue to the 2xx, over delivered webhooks`,
      `  receiver saw    ${requests} requests: every attempt, retries included; ${badSignatures} with a bad signature`,
      `  took            ${summary.seconds} s`,
      '',
      JSON.stringify(summary),
      '',
    ].join('\n'),
  );

  await worker.close({ timeoutMs: 5000 });
  await queue.close();
  connection.disconnect();
  await redis.stop();
  await rm(redis.dir, { recursive: true, force: true });
  receiver.close();
}

main().catch((err: unknown) => {
  process.stderr.write(
    `requeue demo: ${err instanceof ConfigError ? err.message : ((err as Error)?.stack ?? String(err))}\n`,
  );
  process.exitCode = 1;
});
