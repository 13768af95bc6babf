import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { parseBreakerOptions } from '../../src/policy/breaker/breaker-options.js';
import { RequeueMetrics } from '../../src/scheduler/metrics.js';
import { createQueue, type RequeueQueue } from '../../src/scheduler/queue.js';
import { registerAdmin } from '../../workers/service/admin/index.js';
import { createIntakeServer, type IntakeServer } from '../../workers/service/http.js';
import { DeliveryLog } from '../../workers/webhook/delivery-log.js';
import { writesDuring } from '../harness/monitor.js';
import { cleanQueue, connect, uniqueQueueName, type RedisClient } from '../harness/redis.js';

/** Issue 24, item 6: the delivery log through the admin API: searched, paged, refused in one line. */

const logger = createLogger({ level: 'silent' });
const hooks = uniqueQueueName('dlog-admin');
const jobs = uniqueQueueName('dlog-admin-jobs');
let redis: RedisClient;
let app: IntakeServer;
let url: string;
const queues: RequeueQueue[] = [];

beforeAll(async () => {
  redis = connect();
  const hookQueue = createQueue(hooks, { connection: redis });
  const jobQueue = createQueue(jobs, { connection: redis });
  queues.push(hookQueue, jobQueue);
  app = await createIntakeServer({
    queues: new Map([
      [hooks, hookQueue],
      [jobs, jobQueue],
    ]),
    ready: async () => true,
    metrics: new RequeueMetrics(),
    maxBodyBytes: 1 << 20,
    logger,
  });
  await registerAdmin(app, {
    queues: [
      {
        name: hooks,
        kind: 'webhook',
        queue: hookQueue,
        breaker: parseBreakerOptions({}),
        budget: undefined,
      },
      { name: jobs, kind: 'handler', queue: jobQueue, breaker: undefined, budget: undefined },
    ],
    redis,
    access: { kind: 'loopback' },
    host: '127.0.0.1',
    redactHeaders: [],
    logger,
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.address();
  url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/admin`;
  const log = new DeliveryLog(redis, hooks);
  const now = Date.now();
  for (let i = 0; i < 5; i++)
    await log.write({
      at: now - 1_000 + i,
      messageId: `msg-${i % 2}`,
      eventType: i < 2 ? 'invoice.paid' : 'user.created',
      endpointId: `ep-${i % 3}`,
      jobId: `job-${i}`,
      attempt: 1,
      outcome: i === 4 ? 'dead' : i === 0 ? 'retrying' : 'delivered',
      ...(i === 3
        ? { code: 'CERT_HAS_EXPIRED', reason: 'tls-certificate' }
        : { status: i === 0 || i === 4 ? 503 : 200 }),
      latencyMs: 10 + i,
      excerpt: i === 0 ? 'token=abc Authorization: Bearer abcdefghijkl' : 'ok',
    });
});

afterAll(async () => {
  await app.close();
  for (const q of queues) await q.close();
  await cleanQueue(redis, hooks);
  await cleanQueue(redis, jobs);
  redis.disconnect();
});

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON under test, checked by expect()
async function get(path: string): Promise<{ status: number; body: any }> {
  const res = await fetch(`${url}${path}`);
  return { status: res.status, body: await res.json() };
}

const ids = (body: { entries: { jobId: string }[] }) => body.entries.map((e) => e.jobId);

describe('GET /admin/queues/:queue/deliveries', () => {
  it('searches by message, endpoint, type, status and outcome, newest first, and writes nothing', async () => {
    const base = `/queues/${hooks}/deliveries`;
    const writes = await writesDuring(redis, hooks, async () => {
      expect(ids((await get(base)).body)).toEqual(['job-4', 'job-3', 'job-2', 'job-1', 'job-0']);
      expect(ids((await get(`${base}?message=msg-1`)).body)).toEqual(['job-3', 'job-1']);
      expect(ids((await get(`${base}?endpoint=ep-0`)).body)).toEqual(['job-3', 'job-0']);
      expect(ids((await get(`${base}?type=invoice.paid`)).body)).toEqual(['job-1', 'job-0']);
      expect(ids((await get(`${base}?status=5xx`)).body)).toEqual(['job-4', 'job-0']);
      expect(ids((await get(`${base}?status=none`)).body)).toEqual(['job-3']);
      expect(ids((await get(`${base}?outcome=dead`)).body)).toEqual(['job-4']);
    });
    expect(writes).toEqual([]);
    const first = (await get(`${base}?limit=2`)).body;
    expect(ids(first)).toEqual(['job-4', 'job-3']);
    const next = (await get(`${base}?limit=2&cursor=${encodeURIComponent(first.next)}`)).body;
    expect(ids(next)).toEqual(['job-2', 'job-1']);
    const tls = (await get(`${base}?status=none`)).body.entries[0];
    expect(tls).toMatchObject({ code: 'CERT_HAS_EXPIRED', reason: 'tls-certificate' });
  });

  it('refuses bad input in one line naming the field', async () => {
    const base = `/queues/${hooks}/deliveries`;
    for (const [query, field] of [
      ['status=600', 'status'],
      ['status=abc', 'status'],
      ['outcome=lost', 'outcome'],
      ['limit=0', 'limit'],
      ['cursor=nope', 'cursor'],
      [`message=${'m'.repeat(300)}`, 'message'],
      ['colour=red', 'colour'],
    ] as const) {
      const { status, body } = await get(`${base}?${query}`);
      expect(status, query).toBe(400);
      expect(JSON.stringify(body), query).toContain(field);
    }
    const handler = await get(`/queues/${jobs}/deliveries`);
    expect(handler.status).toBe(404);
    expect(handler.body.error).toMatch(/not a webhook queue/);
  });
});
