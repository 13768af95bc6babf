/**
 * Issue 22, item 4: adaptive concurrency per key, shared by the fleet. Real
 * workers on a real Redis against receivers on loopback whose capacity is a
 * number of requests at once.
 */
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { parseAdaptiveConcurrency } from '../../src/policy/limit/limit-options.js';
import { requeueKeys } from '../../src/redis/keys.js';
import { LimitStore, type Acquired } from '../../src/redis/limit-store.js';
import { PauseStore } from '../../src/redis/pause-store.js';
import { createQueue } from '../../src/scheduler/queue.js';
import { createWorker, type RequeueWorker } from '../../src/scheduler/requeue-worker.js';
import { parseJobState } from '../../src/policy/job-state.js';
import { createWebhookWorker, enqueueWebhook } from '../../workers/webhook/index.js';
import { onCleanup } from '../harness/cleanup.js';
import { cleanQueue, connect, jobKey, redisUrl, uniqueQueueName } from '../harness/redis.js';

const admin = connect();
afterAll(() => admin.disconnect());
const logger = createLogger({ level: 'silent' });

interface Dependency {
  url: string;
  /** Requests in flight when each request arrived (itself included), in arrival order. */
  arrivals: { at: number; inFlight: number; status: number }[];
  /** While true, every request is answered 429 with `Retry-After: 1`. */
  limiting: boolean;
}

/**
 * A dependency that serves `capacity` requests at once in `serviceMs` each
 * and answers 503 at once to any request beyond them.
 */
async function dependency(capacity: number, serviceMs: number): Promise<Dependency> {
  const dep: Dependency = { url: '', arrivals: [], limiting: false };
  let inFlight = 0;
  const server = createServer((req, res) => {
    inFlight += 1;
    const over = inFlight > capacity;
    const arrival = { at: Date.now(), inFlight, status: dep.limiting ? 429 : over ? 503 : 200 };
    dep.arrivals.push(arrival);
    req.resume();
    const answer = () => {
      inFlight -= 1;
      // A limiting dependency limits the requests it still holds too: a 200 for
      // one taken before it began limiting would end the 429 streak (the
      // streak is what this test reads; CI saw a 200 land after the 5th 429).
      if (dep.limiting) arrival.status = 429;
      res.writeHead(arrival.status, arrival.status === 429 ? { 'retry-after': '1' } : {}).end();
    };
    if (arrival.status === 200) setTimeout(answer, serviceMs);
    else answer();
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
  dep.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  return dep;
}

/** A GET that fails with the status as `err.status` (what the classifier reads). */
function call(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: false }, (res) => {
      res.resume();
      const status = res.statusCode ?? 0;
      if (status < 300) resolve(status);
      else
        reject(
          Object.assign(new Error(`HTTP ${status}`), {
            status,
            ...(res.headers['retry-after'] ? { retryAfter: res.headers['retry-after'] } : {}),
          }),
        );
    });
    req.on('error', reject);
    req.end();
  });
}

async function until(check: () => boolean | Promise<boolean>, timeoutMs: number, what: string) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Records every acquire a worker makes (the replies Redis gave). */
function recordAcquires(worker: RequeueWorker<unknown, unknown>, into: Acquired[]): void {
  const store = worker.limits!.store;
  const acquire = store.acquire.bind(store);
  store.acquire = async (...args) => {
    const got = await acquire(...args);
    into.push(got);
    return got;
  };
}

/** Every requeue key of `name` (the index and per-key state alike). */
async function limitKeysLeft(name: string): Promise<string[]> {
  const keys = requeueKeys(name);
  const found: string[] = [];
  for (const pattern of [`${keys.limit('')}*`, `${keys.limitLeases('')}*`, keys.limitKeys]) {
    let cursor = '0';
    do {
      const [next, batch] = await admin.scan(cursor, 'MATCH', pattern, 'COUNT', 1_000);
      found.push(...batch);
      cursor = next;
    } while (cursor !== '0');
  }
  return found;
}

describe('adaptive concurrency per key, shared by the fleet', () => {
  it(
    'two workers against a dependency that serves 6 at once: in flight converges under 6, never past the learned limit, every job done',
    { timeout: 90_000 },
    async () => {
      const capacity = 6;
      const dep = await dependency(capacity, 40);
      const name = uniqueQueueName('adaptive');
      const queue = createQueue(name, { connection: redisUrl() });
      const options = {
        connection: redisUrl(),
        logger,
        concurrency: 20,
        keyConcurrency: 20,
        breakerKey: () => 'dep',
        policy: { strategy: 'fixed' as const, baseMs: 100, maxAttempts: 100 },
        adaptiveConcurrency: { initial: 20, ceiling: 40, latencyTargetMs: 2_000 },
      };
      const workers = [0, 1].map(() => createWorker(name, () => call(dep.url), options));
      const acquires: Acquired[] = [];
      for (const w of workers) recordAcquires(w, acquires);
      onCleanup(async () => {
        await Promise.all(workers.map((w) => w.close({ timeoutMs: 2_000 })));
        await queue.close();
        await cleanQueue(admin, name);
      });
      await Promise.all(workers.map((w) => w.waitUntilReady()));
      const jobs = 600;
      for (let i = 0; i < jobs; i += 100)
        await queue.addBulk(Array.from({ length: 100 }, (_, j) => ({ name: 'j', data: i + j })));
      await until(async () => (await queue.counts()).completed === jobs, 80_000, 'every job');

      // Admission never went past the limit the fleet had learned at that moment.
      const admitted = acquires.filter((a) => a.admitted);
      expect(admitted.every((a) => a.inFlight <= Math.floor(a.limit))).toBe(true);
      expect(Math.max(...admitted.map((a) => a.inFlight))).toBeLessThanOrEqual(40);
      // It started at 20 (three times what the dependency takes) and converged under it:
      // in the second half, requests meet at most one over the capacity, and few 503s.
      const late = dep.arrivals.slice(Math.floor(dep.arrivals.length / 2));
      const overloaded = late.filter((a) => a.status === 503).length / late.length;
      const within = late.filter((a) => a.inFlight <= capacity + 1).length / late.length;
      console.log(
        `[adaptive] ${dep.arrivals.length} requests for ${jobs} jobs; second half: ` +
          `${(overloaded * 100).toFixed(1)} % 503, ${(within * 100).toFixed(1)} % within capacity + 1; ` +
          `limits admitted ${Math.min(...admitted.map((a) => a.limit)).toFixed(2)}–${Math.max(...admitted.map((a) => a.limit)).toFixed(2)}`,
      );
      expect(within).toBeGreaterThan(0.95);
      expect(overloaded).toBeLessThan(0.25);
      expect(await queue.counts()).toMatchObject({ completed: jobs, dead: 0, failed: 0 });
    },
  );

  it('a crashed holder’s lease expires: its key runs again once leaseMs has passed', async () => {
    const name = uniqueQueueName('adaptive-crash');
    const queue = createQueue(name, { connection: redisUrl() });
    const adaptive = { initial: 2, ceiling: 2, leaseMs: 1_500 };
    // A worker that died holding both of the key's places.
    const store = new LimitStore(admin, name);
    const params = { ...parseAdaptiveConcurrency(adaptive), leaseMs: 1_500 };
    const crashedAt = Date.now();
    expect((await store.acquire('k', 'dead:1', params)).admitted).toBe(true);
    expect((await store.acquire('k', 'dead:2', params)).admitted).toBe(true);
    let ranAt = 0;
    const worker = createWorker(
      name,
      async () => {
        ranAt = Date.now();
      },
      { connection: redisUrl(), logger, breakerKey: () => 'k', adaptiveConcurrency: adaptive },
    );
    onCleanup(async () => {
      await worker.close({ timeoutMs: 2_000 });
      await queue.close();
      await cleanQueue(admin, name);
    });
    const done = new Promise((resolve) => worker.on('job:completed', resolve));
    const { id } = await queue.add('j', {});
    await done;
    expect(ranAt - crashedAt).toBeGreaterThanOrEqual(1_500);
    const state = parseJobState(await admin.hget(jobKey(admin, name, id), 'rq'));
    // Held back as a full bulkhead holds a job back: no attempt used.
    expect(state?.history[0]).toMatchObject({ outcome: 'deferred', decision: 'deferred' });
    expect(state?.history.at(-1)).toMatchObject({ attempt: 1, outcome: 'succeeded' });
  });

  it(
    'an endpoint that keeps answering 429 has its limit cut and is paused whole; then its limit comes back along CUBIC’s curve, not all at once (webhook worker defaults)',
    { timeout: 60_000 },
    async () => {
      const dep = await dependency(1_000, 100);
      const name = uniqueQueueName('adaptive-429');
      const queue = createQueue(name, { connection: redisUrl() });
      const workers = [0, 1].map(() =>
        createWebhookWorker(name, { connection: redisUrl(), allowPrivate: true, logger }),
      );
      onCleanup(async () => {
        await Promise.all(workers.map((w) => w.close({ timeoutMs: 2_000 })));
        await queue.close();
        await cleanQueue(admin, name);
      });
      await Promise.all(workers.map((w) => w.waitUntilReady()));
      const events = 300;
      const enqueue = (i: number) =>
        enqueueWebhook(queue, {
          endpoint: { id: 'ep', url: dep.url, maxConcurrency: 16 },
          event: { id: `e-${i}`, type: 't', payload: {} },
        });
      // Warm up: the limit climbs past its start (10) while the endpoint keeps up.
      for (let i = 0; i < 200; i += 1) await enqueue(i);
      await until(() => dep.arrivals.length >= 60, 20_000, 'the first deliveries');
      const store = new LimitStore(admin, name);
      const [before] = await store.list();
      dep.limiting = true;
      const pauses = new PauseStore(admin, name);
      let paused: { key: string; until: number }[] = [];
      await until(() => dep.arrivals.some((a) => a.status === 429), 10_000, 'a 429');
      for (let i = 0; i < 100 && paused.length === 0; i += 1) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        paused = await pauses.list();
      }
      // The key's state as the 429s left it: the limit and the peak it was cut from.
      const [limit, peak, throttles] = (
        await admin.hmget(requeueKeys(name).limit('ep'), 'l', 'm', 'r')
      ).map(Number);
      dep.limiting = false;
      // Every answer a 429: paused whole after pauseAfter429s (5) in a row, until its Retry-After.
      expect(paused.map((p) => p.key)).toEqual(['ep']);
      expect(throttles).toBeGreaterThanOrEqual(5);
      // Cut by ×0.7 once per round trip (the 429s in flight together are one cut), not to the floor.
      expect(peak).toBeGreaterThan(1);
      expect(limit).toBeCloseTo(peak! * 0.7, 9);
      const limited = dep.arrivals.findLastIndex((a) => a.status === 429);
      for (let i = 200; i < events; i += 1) await enqueue(i);
      await until(
        () => dep.arrivals.filter((a) => a.status === 200).length >= events,
        40_000,
        'every delivery',
      );
      const resumed = dep.arrivals.slice(limited + 1).filter((a) => a.status === 200);
      const start = resumed[0]!.at;
      const peakWithin = (ms: number) =>
        Math.max(...resumed.filter((a) => a.at - start < ms).map((a) => a.inFlight));
      console.log(
        `[adaptive 429] limit before ${JSON.stringify(before)}; cut from ${peak} to ${limit} ` +
          `after ${throttles} 429s in a row; in flight at +100 ms ${peakWithin(100)}, ` +
          `+300 ms ${peakWithin(300)}, +1 s ${peakWithin(1_000)}, +3 s ${peakWithin(3_000)}`,
      );
      // Back gradually: never past where it was cut from at first.
      expect(peakWithin(100)).toBeLessThanOrEqual(Math.floor(peak!));
    },
  );

  it(
    '10,000 one-off keys leave no per-key state behind once their jobs complete',
    { timeout: 90_000 },
    async () => {
      const name = uniqueQueueName('adaptive-keys');
      const queue = createQueue<{ key: string }>(name, { connection: redisUrl() });
      const worker = createWorker<{ key: string }>(name, async () => undefined, {
        connection: redisUrl(),
        logger,
        concurrency: 50,
        breakerKey: (job) => job.data.key,
        adaptiveConcurrency: {},
      });
      onCleanup(async () => {
        await worker.close({ timeoutMs: 2_000 });
        await queue.close();
        await cleanQueue(admin, name);
      });
      const keys = 10_000;
      for (let i = 0; i < keys; i += 500)
        await queue.addBulk(
          Array.from({ length: 500 }, (_, j) => ({ name: 'j', data: { key: `tenant-${i + j}` } })),
        );
      await until(async () => (await queue.counts()).completed === keys, 80_000, 'every job');
      await worker.limits!.close();
      expect(await limitKeysLeft(name)).toEqual([]);
    },
  );
});
