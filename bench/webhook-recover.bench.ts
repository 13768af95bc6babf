/**
 * Recover in its own lane (issue 24, item 5): live webhook deliveries'
 * latency (enqueue → the receiver gets the request), p50/p99/max, with
 * nothing else running, while a recovery of N dead deliveries of one
 * endpoint runs (`recoverEndpoint`: the lane), and — for comparison — while
 * the same deaths are replayed by a plain DLQ replay (the wait list, which
 * BullMQ serves before every keyed job). One webhook worker in this process
 * (its defaults, private destinations allowed), a loopback receiver, Redis
 * on 127.0.0.1:6379 (REDIS_URL), a fresh queue per case.
 *
 * Run: `node --import tsx bench/webhook-recover.bench.ts [--dead 5000]
 * [--live 2000] [--endpoints 20] [--window-ms 10000] [--rate 1000] [--rounds 1]`.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { DeadLetterQueue } from '../src/scheduler/dlq/dead-letter-queue.js';
import { createQueue, type RequeueQueue } from '../src/scheduler/queue.js';
import { recoverEndpoint } from '../workers/webhook/recovery.js';
import { createWebhookWorker, enqueueWebhook } from '../workers/webhook/webhook-worker.js';
import { cleanQueue } from './support/clean-queue.js';
import { describeMachine } from './support/machine.js';

const { values } = parseArgs({
  options: {
    dead: { type: 'string', default: '5000' },
    live: { type: 'string', default: '2000' },
    endpoints: { type: 'string', default: '20' },
    'window-ms': { type: 'string', default: '10000' },
    rate: { type: 'string', default: '1000' },
    rounds: { type: 'string', default: '1' },
  },
});
const deadCount = Number(values.dead);
const liveCount = Number(values.live);
const endpoints = Number(values.endpoints);
const windowMs = Number(values['window-ms']);
const rate = Number(values.rate);
const rounds = Number(values.rounds);

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
  maxRetriesPerRequest: null,
});
const sentAt = new Map<string, number>();
const latencies: number[] = [];
let recoveredHits = 0;
let lastRecoveredAt = 0;
let failing = true;
const server = createServer((req, res) => {
  req.resume();
  const id = String(req.headers['webhook-id']);
  if (req.url === '/recover') {
    if (failing) return void res.writeHead(400).end();
    recoveredHits++;
    lastRecoveredAt = performance.now();
  } else {
    const at = sentAt.get(id);
    if (at !== undefined) latencies.push(performance.now() - at);
  }
  res.writeHead(200).end();
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
const logger = pino({ level: 'silent' });

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

async function until(check: () => boolean | Promise<boolean>, timeoutMs = 600_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function runCase(kind: 'none' | 'lane' | 'wait-list') {
  const name = `bench-recover-${kind}-${Date.now()}`;
  const queue: RequeueQueue = createQueue(name, { connection: redis });
  const dlq = new DeadLetterQueue(name, { connection: redis, logger });
  const worker = createWebhookWorker(name, { connection: redis, allowPrivate: true, logger });
  await worker.waitUntilReady();
  latencies.length = 0;
  recoveredHits = 0;
  if (kind !== 'none') {
    failing = true;
    const send = (i: number) =>
      enqueueWebhook(queue, {
        endpoint: { id: 'ep-recover', url: `${base}/recover` },
        event: { id: `dead-${i}`, type: 'order.paid', payload: { i } },
      });
    for (let i = 0; i < deadCount; i += 500)
      await Promise.all(
        Array.from({ length: Math.min(500, deadCount - i) }, (_, k) => send(i + k)),
      );
    await until(async () => (await dlq.count()) >= deadCount);
    failing = false;
  }
  const started = performance.now();
  const recovery =
    kind === 'lane'
      ? recoverEndpoint(dlq, 'ep-recover', { since: 0, ratePerSec: rate })
      : kind === 'wait-list'
        ? dlq.replay({ tags: { endpoint: 'ep-recover' } }, { ratePerSec: rate })
        : Promise.resolve();
  for (let i = 0; i < liveCount; i++) {
    const due = started + (i / liveCount) * windowMs;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const id = `live-${kind}-${i}`;
    sentAt.set(id, performance.now());
    void enqueueWebhook(queue, {
      endpoint: { id: `ep-${i % endpoints}`, url: `${base}/live` },
      event: { id, type: 'order.paid', payload: { i } },
    });
  }
  await recovery;
  await until(() => latencies.length >= liveCount);
  if (kind !== 'none') await until(() => recoveredHits >= deadCount);
  const sorted = [...latencies].sort((a, b) => a - b);
  const row = {
    case: kind,
    p50: Math.round(percentile(sorted, 50)),
    p99: Math.round(percentile(sorted, 99)),
    max: Math.round(sorted.at(-1) ?? NaN),
    recoveredInS: kind === 'none' ? null : +((lastRecoveredAt - started) / 1000).toFixed(1),
  };
  await worker.close({ timeoutMs: 5_000 });
  await queue.close();
  await dlq.close();
  await cleanQueue(redis, name);
  return row;
}

const machine = await describeMachine(redis);
const rows = [];
// Rounds alternate the cases, so that the load of the shared machine falls on each alike.
for (let round = 1; round <= rounds; round++)
  for (const kind of ['none', 'lane', 'wait-list'] as const) {
    const row = { round, ...(await runCase(kind)) };
    process.stderr.write(`${JSON.stringify(row)}\n`);
    rows.push(row);
  }
process.stdout.write(
  JSON.stringify(
    {
      date: new Date().toISOString(),
      machine,
      deadCount,
      liveCount,
      endpoints,
      windowMs,
      rate,
      rows,
    },
    null,
    2,
  ) + '\n',
);
server.close();
redis.disconnect();
