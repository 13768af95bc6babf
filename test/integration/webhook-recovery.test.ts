import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { isResendError } from '../../src/errors/resend-error.js';
import { requeueKeys } from '../../src/redis/keys.js';
import { DeadLetterQueue } from '../../src/scheduler/dlq/dead-letter-queue.js';
import { createQueue, type RequeueQueue } from '../../src/scheduler/queue.js';
import { retryJobNow } from '../../src/scheduler/retry-now.js';
import { recoverEndpoint, recoverLane, resendMessage } from '../../workers/webhook/recovery.js';
import {
  createWebhookWorker,
  enqueueWebhook,
  type WebhookWorker,
} from '../../workers/webhook/webhook-worker.js';
import { onCleanup } from '../harness/cleanup.js';
import {
  bullPrefixOf,
  cleanedQueueName,
  connect,
  jobKey,
  type RedisClient,
} from '../harness/redis.js';
import { WorkerEventLog } from '../harness/worker-events.js';

/**
 * Issue 24, item 5: resend a delivered message to one endpoint, retry a
 * scheduled retry now (fenced by its attempt), and recover an endpoint's
 * dead deliveries since T — counted by a dry run, fenced like DLQ replay, in
 * their own lane behind live deliveries. Real Redis, a real loopback receiver.
 */

interface Hit {
  path: string;
  id: string;
  headers: IncomingHttpHeaders;
}

let redis: RedisClient;
let server: Server;
let port = 0;
const hits: Hit[] = [];
/** Per path, the statuses to answer in turn; 200 once they run out. */
const script = new Map<string, number[]>();

beforeAll(async () => {
  redis = connect();
  server = createServer((req, res) => {
    req.resume();
    const path = req.url ?? '';
    hits.push({ path, id: String(req.headers['webhook-id']), headers: req.headers });
    const status = script.get(path)?.shift() ?? 200;
    res.writeHead(status).end(status === 200 ? 'ok' : 'no');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  redis.disconnect();
});

const url = (path: string) => `http://127.0.0.1:${port}${path}`;
const hitsOf = (path: string) => hits.filter((h) => h.path === path);

function newQueue(prefix: string): { name: string; queue: RequeueQueue } {
  const name = cleanedQueueName(redis, prefix);
  const queue = createQueue(name, { connection: redis });
  onCleanup(() => queue.close());
  return { name, queue };
}

async function startWorker(
  name: string,
  options: Parameters<typeof createWebhookWorker>[1] = {},
): Promise<{ worker: WebhookWorker; events: WorkerEventLog }> {
  const worker = createWebhookWorker(name, {
    connection: redis,
    allowPrivate: true,
    breaker: false,
    adaptiveConcurrency: false,
    policy: { strategy: 'fixed', baseMs: 30, capMs: 30, maxAttempts: 2 },
    ...options,
  });
  const events = new WorkerEventLog(worker);
  onCleanup(() => worker.close({ timeoutMs: 2_000 }));
  await worker.waitUntilReady();
  return { worker, events };
}

function send(queue: RequeueQueue, endpoint: string, path: string, id: string) {
  return enqueueWebhook(queue, {
    endpoint: { id: endpoint, url: url(path) },
    event: { id, type: 'order.paid', payload: { id } },
  });
}

describe('resend', () => {
  it('sends a delivered message again as its own job: same webhook-id, its own history and log entries', async () => {
    const { name, queue } = newQueue('resend');
    const { worker, events } = await startWorker(name);
    const first = await send(queue, 'ep-r', '/resend', 'msg-r1');
    await events.waitFor('job:completed', (e) => e.jobId === first.id);

    const resent = await resendMessage(queue, 'ep-r', 'msg-r1', { redis });
    expect(resent).toMatchObject({ endpointId: 'ep-r', messageId: 'msg-r1', resend: 1 });
    expect(resent.deliveryId).not.toBe(first.id);
    await events.waitFor('job:completed', (e) => e.jobId === resent.deliveryId);
    expect(hitsOf('/resend').map((h) => h.id)).toEqual(['msg-r1', 'msg-r1']);

    const again = await resendMessage(queue, 'ep-r', 'msg-r1', { redis });
    expect(again.resend).toBe(2);
    await events.waitFor('job:completed', (e) => e.jobId === again.deliveryId);

    const log = worker.deliveryLog!.log;
    await vi.waitFor(async () =>
      expect((await log.search({ messageId: 'msg-r1' })).entries).toHaveLength(3),
    );
    const entries = (await log.search({ messageId: 'msg-r1' })).entries;
    expect(new Set(entries.map((e) => e.jobId))).toEqual(
      new Set([first.id, resent.deliveryId, again.deliveryId]),
    );
    expect(entries.every((e) => e.outcome === 'delivered' && e.endpointId === 'ep-r')).toBe(true);
  });

  it('refuses a message never delivered to that endpoint, naming it', async () => {
    const { queue } = newQueue('resend-none');
    const err = await resendMessage(queue, 'ep-x', 'msg-none', { redis }).catch((e: unknown) => e);
    expect(isResendError(err)).toBe(true);
    expect((err as Error).message).toMatch(/msg-none.*ep-x/);
  });
});

describe('retry-now', () => {
  it('makes a scheduled retry due now, only while it is that retry at that attempt', async () => {
    const { name, queue } = newQueue('retrynow');
    script.set('/later', [503]);
    const { events } = await startWorker(name, {
      policy: { strategy: 'fixed', baseMs: 3_600_000, capMs: 3_600_000, maxAttempts: 3 },
    });
    const job = await send(queue, 'ep-later', '/later', 'msg-later');
    await events.waitFor('retry:scheduled', (e) => e.jobId === job.id);

    const stale = await retryJobNow(redis, name, job.id, {
      attemptsStarted: 0,
      prefix: bullPrefixOf(redis, name),
    });
    expect(stale.result).toBe('attempt-moved-on');
    expect(hitsOf('/later')).toHaveLength(1);

    const moved = await retryJobNow(redis, name, job.id, { prefix: bullPrefixOf(redis, name) });
    expect(moved).toMatchObject({ id: job.id, result: 'moved', attemptsStarted: 1 });
    await events.waitFor('job:completed', (e) => e.jobId === job.id);
    expect(hitsOf('/later')).toHaveLength(2);

    const after = await retryJobNow(redis, name, job.id, { prefix: bullPrefixOf(redis, name) });
    expect(after.result).toBe('not-delayed');
    expect((await retryJobNow(redis, name, 'no-such-job')).result).toBe('not-found');
  });
});

describe('recover', () => {
  it('counts by a dry run, then brings back only that endpoint’s deaths in [since, until), once', async () => {
    const { name, queue } = newQueue('recover');
    const dlq = new DeadLetterQueue(name, { connection: redis });
    onCleanup(() => dlq.close());
    script.set('/down', [400, 400, 400, 400]);
    script.set('/other-down', [400]);
    const { events } = await startWorker(name);
    for (const id of ['d1', 'd2']) await send(queue, 'ep-down', '/down', id);
    await send(queue, 'ep-other', '/other-down', 'o1');
    await events.waitForCount('job:dead-lettered', 3);
    const since = Math.max(...events.all('job:dead-lettered').map((e) => e.record.deadAt)) + 1;
    await vi.waitFor(() => expect(Date.now()).toBeGreaterThan(since));
    for (const id of ['d3', 'd4']) await send(queue, 'ep-down', '/down', id);
    await events.waitForCount('job:dead-lettered', 5);

    expect(await recoverEndpoint(dlq, 'ep-down', { since: 0, dryRun: true })).toEqual({
      dryRun: true,
      endpointId: 'ep-down',
      count: 4,
    });
    expect(await recoverEndpoint(dlq, 'ep-down', { since, dryRun: true })).toMatchObject({
      count: 2,
    });
    expect(
      await recoverEndpoint(dlq, 'ep-down', { since: 0, until: since, dryRun: true }),
    ).toMatchObject({ count: 2 });

    const done = await recoverEndpoint(dlq, 'ep-down', { since });
    expect(done).toMatchObject({ dryRun: false, done: 2, total: 2 });
    await events.waitForCount('job:completed', 2);
    expect(
      new Set(
        hitsOf('/down')
          .slice(-2)
          .map((h) => h.id),
      ),
    ).toEqual(new Set(['d3', 'd4']));
    // Run again: nothing is left in that window; the others stay dead.
    expect(await recoverEndpoint(dlq, 'ep-down', { since })).toMatchObject({ done: 0, total: 0 });
    expect(await dlq.count({ tags: { endpoint: 'ep-down' } })).toBe(2);
    expect(await dlq.count({ tags: { endpoint: 'ep-other' } })).toBe(1);
  });

  it('puts recovered deliveries in their own lane: live deliveries of the same and other endpoints go first', async () => {
    const { name, queue } = newQueue('recover-lane');
    const dlq = new DeadLetterQueue(name, { connection: redis });
    onCleanup(() => dlq.close());
    script.set(
      '/lane-a',
      Array.from({ length: 20 }, () => 400),
    );
    const first = await startWorker(name, { concurrency: 4 });
    for (let i = 0; i < 20; i++) await send(queue, 'ep-a', '/lane-a', `dead-${i}`);
    await first.events.waitForCount('job:dead-lettered', 20);
    await first.worker.close({ timeoutMs: 2_000 });

    // No worker runs: the recovery and the live deliveries wait together.
    const recovered = await recoverEndpoint(dlq, 'ep-a', { since: 0, ratePerSec: 1_000 });
    expect(recovered).toMatchObject({ done: 20 });
    // The lane is a key of fair dispatch; each job keeps its endpoint as its own key (parking).
    expect(await redis.zscore(requeueKeys(name).fair, recoverLane('ep-a'))).not.toBeNull();
    expect(await redis.hget(jobKey(redis, name, '%7Eep-a/dead-0'), 'rqd')).toBe('ep-a');
    for (let i = 0; i < 5; i++) {
      await send(queue, 'ep-a', '/lane-a', `live-a-${i}`);
      await send(queue, 'ep-b', '/lane-b', `live-b-${i}`);
    }
    const start = hits.length;
    const second = await startWorker(name, { concurrency: 1 });
    await second.events.waitForCount('job:completed', 30);
    const order = hits.slice(start).map((h) => h.id);
    expect(order).toHaveLength(30);
    // Start-time fair queuing: at most the lane's first job ties with the live ones.
    const firstEleven = order.slice(0, 11);
    for (let i = 0; i < 5; i++) {
      expect(firstEleven).toContain(`live-a-${i}`);
      expect(firstEleven).toContain(`live-b-${i}`);
    }
  });
});
