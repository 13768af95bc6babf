import { afterAll, beforeAll } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { parseBreakerOptions } from '../../src/policy/breaker/breaker-options.js';
import type { RedisClient } from '../../src/redis/connection.js';
import { RequeueMetrics } from '../../src/scheduler/metrics.js';
import { createQueue, type RequeueQueue } from '../../src/scheduler/queue.js';
import { createWorker, type Handler } from '../../src/scheduler/requeue-worker.js';
import { registerAdmin } from '../../workers/service/admin/index.js';
import { createIntakeServer, type IntakeServer } from '../../workers/service/http.js';
import { WorkerEventLog } from '../harness/worker-events.js';
import { bullPrefixOf, cleanQueue, connect, redisUrl, uniqueQueueName } from '../harness/redis.js';

/**
 * The dashboard lists' fixture: the admin API over two queues holding jobs in
 * every state, and calls to it (`dashboard-lists.test.ts` starts it).
 */

export const logger = createLogger({ level: 'silent' });
const token = 'lists-admin-token-0123456789abcdef';
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON under test, checked by expect()
export type Json = any;

export let redis: RedisClient;
export let name: string;
let queue: RequeueQueue;
/** A second queue, for a job a worker runs again while the test holds its old fence. */
export let other: string;
export let otherQueue: RequeueQueue;
let app: IntakeServer;
let url: string;
export const ids: Record<string, string> = {};

export const call = async (path: string, init: { method?: string; body?: unknown } = {}) => {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${url}/admin${path}`, {
    method: init.method ?? 'GET',
    headers,
    ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
  });
  return { status: res.status, body: (await res.json()) as Json };
};
export const inDelayed = async (id: string) =>
  (await redis.zscore(`${bullPrefixOf(redis, name)}:${name}:delayed`, id)) !== null;
export const inWait = async (id: string) =>
  (await redis.lpos(`${bullPrefixOf(redis, name)}:${name}:wait`, id)) !== null;

/**
 * Before the calling file's tests: the admin API on loopback over two queues,
 * and jobs in every state (a real worker running `handler` completes one,
 * schedules a retry and dead-letters one); after them, everything removed.
 */
export function startListsFixture(handler: Handler<unknown, unknown>): void {
  beforeAll(async () => {
    redis = connect();
    name = uniqueQueueName('dash-lists');
    queue = createQueue(name, { connection: redis });
    other = uniqueQueueName('dash-moved-on');
    otherQueue = createQueue(other, { connection: redis });
    app = await createIntakeServer({
      queues: new Map([
        [name, queue],
        [other, otherQueue],
      ]),
      ready: async () => true,
      metrics: new RequeueMetrics(),
      maxBodyBytes: 1 << 20,
      logger,
    });
    await registerAdmin(app, {
      queues: [
        { name, kind: 'handler', queue, breaker: parseBreakerOptions({}), budget: undefined },
        { name: other, kind: 'handler', queue: otherQueue, breaker: undefined, budget: undefined },
      ],
      redis,
      access: { kind: 'token', token },
      host: '127.0.0.1',
      redactHeaders: [],
      logger,
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const address = app.server.address();
    url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;

    // A real worker makes a completed job, a scheduled retry (10 minutes away) and a death.
    const worker = createWorker(name, handler, {
      connection: redisUrl(),
      logger,
      policy: { strategy: 'fixed', baseMs: 600_000, capMs: 600_000, maxAttempts: 5 },
    });
    const events = new WorkerEventLog(worker);
    ids.done = (await queue.add('ok', { n: 1 })).id;
    ids.retry = (
      await queue.add('flaky', { password: 'hunter2-hunter2' }, { idempotencyKey: 'order:7' })
    ).id;
    ids.dead = (await queue.add('bad', { n: 3 })).id;
    await events.waitFor('job:completed', (e) => e.jobId === ids.done);
    await events.waitFor('retry:scheduled', (e) => e.jobId === ids.retry);
    await events.waitFor('job:dead-lettered', (e) => e.jobId === ids.dead);
    await worker.close({ timeoutMs: 5_000 });
    // With no worker: five waiting jobs and one added with a delay.
    for (let i = 0; i < 5; i += 1) await queue.add('later', { i }, { idempotencyKey: `w:${i}` });
    ids.scheduled = (await queue.add('soon', {}, { delayMs: 3_600_000 })).id;
  }, 60_000);

  afterAll(async () => {
    await app?.close();
    await queue?.close();
    await otherQueue?.close();
    await cleanQueue(redis, name);
    await cleanQueue(redis, other);
    redis?.disconnect();
  });
}
