import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import {
  parseBreakerOptions,
  type BreakerOptionsInput,
} from '../../src/policy/breaker/breaker-options.js';
import type { BreakerState } from '../../src/policy/breaker/breaker.js';
import { toBreakerState } from '../../src/policy/breaker/breaker-state.js';
import { parseBudgetOptions } from '../../src/policy/budget/budget-options.js';
import type { RetryPolicyInput } from '../../src/policy/retry-policy.js';
import { BreakerStore, type BreakerMessage } from '../../src/redis/breaker-store.js';
import { BudgetStore } from '../../src/redis/budget-store.js';
import { requeueKeys } from '../../src/redis/keys.js';
import { createQueue, type RequeueQueue } from '../../src/scheduler/queue.js';
import { parseJobState, type JobState } from '../../src/policy/job-state.js';
import {
  createWorker,
  queueBreakerKey,
  type Handler,
  type RequeueWorker,
  type WorkerOptions,
} from '../../src/scheduler/requeue-worker.js';
import {
  callDependency,
  DependencyError,
  startDependency,
  type Dependency,
  type DependencyCall,
} from '../fixtures/breaker-dependency.js';
import { startFleet, type ChildWorker } from '../fixtures/breaker-fleet.js';
import { bullPrefixOf, cleanedQueueName, connect, jobKey, redisUrl } from '../harness/redis.js';
import { onCleanup } from '../harness/cleanup.js';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

/**
 * How long after a worker learned of a trip a handler may still start: one
 * that passed the breaker a moment before starts within microseconds.
 */
const GRACE_MS = 50;

/** Generous enough to outlive every outage below: deferrals consume no attempt. */
const generousPolicy: RetryPolicyInput = {
  strategy: 'full-jitter',
  baseMs: 100,
  capMs: 1_000,
  maxAttempts: 50,
};

interface Data {
  i?: number;
  key?: string;
  mode?: 'ok' | 'fail-once' | 'timeout-once';
}

let redis: Redis;
beforeAll(() => {
  redis = connect();
});

afterAll(() => {
  redis.disconnect();
});

function queueFor(name: string): RequeueQueue<Data> {
  const queue = createQueue<Data>(name, { connection: redisUrl() });
  onCleanup(() => queue.close());
  return queue;
}

async function dependency(): Promise<Dependency> {
  const dep = await startDependency();
  onCleanup(() => dep.close());
  return dep;
}

function startWorker(
  name: string,
  handler: Handler<Data, unknown>,
  options: WorkerOptions<Data>,
): RequeueWorker<Data, unknown> {
  const worker = createWorker<Data, unknown>(name, handler, {
    connection: redisUrl(),
    logger: createLogger({ level: 'silent' }),
    ...options,
  });
  onCleanup(() => worker.close({ timeoutMs: 5_000 }));
  return worker;
}

async function fleet(
  count: number,
  settings: Parameters<typeof startFleet>[1],
): Promise<ChildWorker[]> {
  const workers = await startFleet(count, settings);
  onCleanup(async () => {
    await Promise.all(workers.map((w) => w.stop()));
  });
  return workers;
}

/** Polls `check` until it holds; fails naming `what` after `timeoutMs`. */
async function until(
  check: () => boolean | Promise<boolean>,
  what: string | (() => string),
  timeoutMs = 20_000,
  intervalMs = 25,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms: ${typeof what === 'string' ? what : what()}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

interface Seen extends BreakerMessage {
  receivedAt: number;
}

type OpenState = Extract<BreakerState, { phase: 'open' }>;

/** Listens to a queue's breaker channel: every transition any worker publishes. */
async function watchTransitions(name: string) {
  const channel = requeueKeys(name).breakerChannel;
  const subscriber = connect();
  onCleanup(() => subscriber.disconnect());
  const seen: Seen[] = [];
  const sentinels = new Set<string>();
  subscriber.on('message', (_channel: string, raw: string) => {
    const message = JSON.parse(raw) as BreakerMessage | { sentinel: string };
    if ('sentinel' in message) sentinels.add(message.sentinel);
    // Read as the workers read it (the published form is the stored one).
    else seen.push({ ...message, state: toBreakerState(message.state)!, receivedAt: Date.now() });
  });
  await subscriber.subscribe(channel);
  return {
    seen,
    /** States of the 'opened' transitions of `key` (tripped, not isolated), in order. */
    opened(key = queueBreakerKey): OpenState[] {
      return seen.flatMap((m) =>
        m.key === key && m.transition === 'opened' && m.state.phase === 'open' ? [m.state] : [],
      );
    },
    transitions(key = queueBreakerKey): string[] {
      return seen.filter((m) => m.key === key).map((m) => m.transition);
    },
    /** Resolves once every message published before this call has arrived. */
    async sync(): Promise<void> {
      const id = String(Math.random());
      // Published from the node that runs the queue's scripts, as transitions
      // are: on a cluster, messages from two nodes may arrive out of order.
      await redis.eval(
        "redis.call('publish', ARGV[1], ARGV[2])",
        1,
        requeueKeys(name).breakerOpenKeys,
        channel,
        JSON.stringify({ sentinel: id }),
      );
      await until(() => sentinels.has(id), 'the sentinel to come back', 5_000, 5);
    },
  };
}

async function readState(name: string, id: string): Promise<JobState | undefined> {
  return parseJobState(await redis.hget(jobKey(redis, name, id), 'rq'));
}

function startedBetween(calls: readonly DependencyCall[], from: number, to: number) {
  return calls.filter((c) => c.startedAt >= from && c.startedAt < to);
}

function jobs(count: number, data: (i: number) => Data = (i) => ({ i })) {
  return Array.from({ length: count }, (_, i) => ({ name: 'call', data: data(i) }));
}

function breakerJson(options: BreakerOptionsInput): string {
  return JSON.stringify(options);
}

describe('the breaker stops calls to a failing dependency', () => {
  it(
    'opens at the failure rate, and no call starts while open but the probes after halfOpenAt (in process)',
    {
      timeout: 60_000,
    },
    async () => {
      const name = cleanedQueueName(redis, 'brk-open');
      const dep = await dependency();
      dep.fail();
      const watch = await watchTransitions(name);
      const learned: number[] = [];
      const completed = new Set<string>();
      const worker = startWorker(name, (job) => callDependency(dep.url, job), {
        concurrency: 4,
        breaker: { failureRate: 0.5, minimumRequests: 5, windowMs: 10_000, openMs: 2_000 },
        policy: generousPolicy,
      });
      worker.on('breaker:opened', () => learned.push(Date.now()));
      worker.on('job:completed', (e) => completed.add(e.jobId));
      await worker.waitUntilReady();
      const queue = queueFor(name);
      await queue.addBulk(jobs(20));

      await until(() => watch.opened().length >= 3, 'a trip, then two failed probes');
      const [first, second, third] = watch.opened() as [OpenState, OpenState, OpenState];
      expect([first.trips, second.trips, third.trips]).toEqual([1, 2, 3]);
      expect(first.halfOpenAt! - first.openedAt!).toBe(2_000);
      const learnedAt = learned[0]!;
      expect(learnedAt).toBeGreaterThanOrEqual(first.openedAt!);

      // Open: nothing starts from the moment the worker knew until halfOpenAt.
      expect(startedBetween(dep.calls, learnedAt + GRACE_MS, first.halfOpenAt!)).toEqual([]);
      // Each half-open period lets exactly one probe through, which fails and reopens.
      expect(startedBetween(dep.calls, first.halfOpenAt!, second.halfOpenAt!)).toHaveLength(1);
      expect(startedBetween(dep.calls, second.halfOpenAt!, Infinity)).toHaveLength(1);

      // The dependency recovers: the next probe closes the circuit and every job completes.
      dep.heal();
      await until(() => watch.transitions().includes('closed'), 'the breaker to close');
      await until(() => completed.size === 20, 'all 20 jobs to complete');
      expect((await queue.counts()).dead).toBe(0);
      expect(dep.calls.filter((c) => c.status === 200)).toHaveLength(20);
    },
  );

  it(
    'lets exactly halfOpenProbes probes through fleet-wide (two worker processes)',
    {
      timeout: 90_000,
    },
    async () => {
      const name = cleanedQueueName(redis, 'brk-probes');
      const dep = await dependency();
      dep.fail();
      // A slow failure keeps both probes of a period in flight together, so the
      // first to fail cannot close the period before the second is admitted.
      dep.setLatency(400);
      const watch = await watchTransitions(name);
      const workers = await fleet(2, {
        REDIS_URL: redisUrl(),
        QUEUE: name,
        DEPENDENCY_URL: dep.url,
        BREAKER: breakerJson({
          failureRate: 0.5,
          minimumRequests: 5,
          windowMs: 10_000,
          openMs: 1_500,
          halfOpenProbes: 2,
          // Any job may probe at once (not retries first): this counts the probes a
          // period admits fleet-wide, whichever jobs they are.
          firstTryProbeDelayMs: 0,
        }),
        POLICY: JSON.stringify(generousPolicy),
        CONCURRENCY: '3',
      });
      const queue = queueFor(name);
      await queue.addBulk(jobs(30));

      await until(() => watch.opened().length >= 3, 'a trip, then two failed half-open periods');
      const [first, second] = watch.opened() as [OpenState, OpenState];
      for (const worker of workers) {
        const learned = await worker.waitForEvent((e) => e.name === 'breaker:opened');
        const own = dep.calls.filter((c) => c.worker === worker.id);
        expect(startedBetween(own, learned.at + GRACE_MS, first.halfOpenAt!)).toEqual([]);
      }
      expect(startedBetween(dep.calls, first.halfOpenAt!, second.halfOpenAt!)).toHaveLength(2);
      expect(startedBetween(dep.calls, second.halfOpenAt!, Infinity)).toHaveLength(2);
      expect(watch.opened().map((s) => s.trips)).toEqual([1, 2, 3]);

      dep.setLatency(0);
      dep.heal();
      await until(() => watch.transitions().includes('closed'), 'the breaker to close');
      await until(
        async () => (await queue.counts()).completed === 30,
        'all 30 jobs to complete',
        30_000,
        200,
      );
      expect((await queue.counts()).dead).toBe(0);
    },
  );

  it(
    'done criterion: 200 jobs, dependency down for 8 s, two worker processes: a few dozen calls, then all complete',
    {
      timeout: 120_000,
    },
    async () => {
      const name = cleanedQueueName(redis, 'brk-done');
      const dep = await dependency();
      dep.fail();
      const watch = await watchTransitions(name);
      await fleet(2, {
        REDIS_URL: redisUrl(),
        QUEUE: name,
        DEPENDENCY_URL: dep.url,
        BREAKER: breakerJson({
          failureRate: 0.5,
          minimumRequests: 10,
          windowMs: 10_000,
          openMs: 3_000,
          halfOpenProbes: 1,
        }),
        POLICY: JSON.stringify(generousPolicy),
        CONCURRENCY: '8',
      });
      const queue = queueFor(name);
      const outageStart = Date.now();
      await queue.addBulk(jobs(200));
      await until(() => watch.opened().length >= 1, 'the breaker to open');
      // The outage lasts 8 s, whatever the breaker does.
      await delay(Math.max(0, outageStart + 8_000 - Date.now()));
      const outageCalls = dep.count();
      dep.heal();
      console.info(
        `[breaker done criterion] the dependency saw ${outageCalls} calls during the 8 s outage ` +
          `(${watch.opened().length} opening(s)); 200 jobs`,
      );
      expect(outageCalls).toBeLessThan(100);

      await until(() => watch.transitions().includes('closed'), 'the breaker to close', 15_000);
      await until(
        async () => (await queue.counts()).completed === 200,
        'all 200 jobs to complete',
        30_000,
        200,
      );
      const counts = await queue.counts();
      expect(counts).toMatchObject({ completed: 200, dead: 0, failed: 0 });
      expect(dep.calls.filter((c) => c.status === 200)).toHaveLength(200);
    },
  );
});

describe('per-key breakers', () => {
  it(
    'an open key does not slow another key; its jobs are deferred without consuming attempts',
    {
      timeout: 60_000,
    },
    async () => {
      const name = cleanedQueueName(redis, 'brk-keys');
      const dep = await dependency();
      dep.fail('a');
      const watch = await watchTransitions(name);
      const attemptSeen = new Map<string, number>();
      const completedAt = new Map<string, number>();
      const deferredKeys: string[] = [];
      const halfOpenAt: { key: string; at: number }[] = [];
      const worker = startWorker(
        name,
        async (job) => {
          const result = await callDependency(dep.url, job);
          attemptSeen.set(job.id, job.attempt);
          return result;
        },
        {
          concurrency: 4,
          breaker: { failureRate: 0.5, minimumRequests: 5, openMs: 4_000, halfOpenProbes: 1 },
          breakerKey: (job) => job.data.key,
          policy: generousPolicy,
        },
      );
      worker.on('job:completed', (e) => completedAt.set(e.jobId, Date.now()));
      // Deferred by the breaker (the bulkhead may hold back either key's jobs for a moment).
      worker.on('job:deferred', (e) => e.reason === 'breaker' && deferredKeys.push(e.key));
      worker.on('breaker:half-open', (e) => halfOpenAt.push({ key: e.key, at: Date.now() }));
      await worker.waitUntilReady();
      const queue = queueFor(name);
      const aJobs = await queue.addBulk(jobs(20, (i) => ({ i, key: 'a' })));
      const bJobs = await queue.addBulk(jobs(30, (i) => ({ i, key: 'b' })));

      await until(
        () => bJobs.every((j) => completedAt.has(j.id)),
        'every job of key b to complete',
      );
      const bDoneAt = Math.max(...bJobs.map((j) => completedAt.get(j.id)!));
      const [aOpened] = watch.opened('a');
      expect(aOpened).toBeDefined();
      // b finished while a was still open: before a even went half-open.
      expect(bDoneAt).toBeLessThan(aOpened!.halfOpenAt!);
      expect(halfOpenAt).toEqual([]);
      expect(watch.transitions('b')).toEqual([]);
      expect(dep.count('b')).toBe(30);
      expect(deferredKeys.length).toBeGreaterThan(0);
      expect(new Set(deferredKeys)).toEqual(new Set(['a']));

      const aStates = await Promise.all(aJobs.map((j) => readState(name, j.id)));
      const deferredRecords = aStates.flatMap(
        (s) => s?.history.filter((r) => r.outcome === 'deferred') ?? [],
      );
      expect(deferredRecords.length).toBeGreaterThan(0);
      for (const record of deferredRecords) {
        expect(record.decision).toBe('deferred');
        expect(record.details).toMatchObject({ breakerKey: 'a' });
        expect(Number(record.details?.count)).toBeGreaterThanOrEqual(1);
      }

      dep.heal('a');
      await until(
        () => aJobs.every((j) => completedAt.has(j.id)),
        'every job of key a to complete',
      );
      expect(watch.transitions('a')).toContain('closed');
      expect((await queue.counts()).dead).toBe(0);
      let deferredOnce = 0;
      for (const { id } of aJobs) {
        const state = (await readState(name, id))!;
        const failed = state.history.filter((r) => r.outcome === 'failed').length;
        const deferrals = state.history
          .filter((r) => r.outcome === 'deferred')
          .reduce((sum, r) => sum + Number(r.details?.count ?? 0), 0);
        expect(deferrals).toBe(state.deferrals);
        // The handler's attempt counts failures only; BullMQ's starts count the deferrals too.
        expect(attemptSeen.get(id)).toBe(failed + 1);
        const job = await Job.fromId(queue.bull, id);
        expect(job?.attemptsStarted).toBe(failed + 1 + deferrals);
        if (deferrals > 0) deferredOnce += 1;
      }
      expect(deferredOnce).toBeGreaterThan(0);
    },
  );
  it(
    'a job deferred more than maxDeferrals times is dead-lettered with max-deferrals',
    {
      timeout: 30_000,
    },
    async () => {
      const name = cleanedQueueName(redis, 'brk-maxdef');
      const breaker = { halfOpenRetryMs: 50, isolatedRetryMs: 50, maxDeferrals: 3 };
      await new BreakerStore(redis, name, parseBreakerOptions(breaker)).forceOpen('c', Date.now());
      let calls = 0;
      const deferred: string[] = [];
      const worker = startWorker(
        name,
        async () => {
          calls += 1;
        },
        { breaker, breakerKey: (job) => job.data.key, policy: generousPolicy },
      );
      worker.on('job:deferred', (e) => deferred.push(e.jobId));
      await worker.waitUntilReady();
      const queue = queueFor(name);
      const dead = new Promise<{ reason: string; attempts: number; history: unknown[] }>(
        (resolve) => worker.once('job:dead-lettered', (e) => resolve(e.record)),
      );
      const { id } = await queue.add('call', { key: 'c' });
      const record = await dead;
      expect(record.reason).toBe('max-deferrals');
      expect(record.attempts).toBe(0);
      expect(record.history).toEqual([
        expect.objectContaining({
          outcome: 'deferred',
          details: { breakerKey: 'c', reason: 'breaker', count: 3 },
        }),
      ]);
      expect(deferred).toEqual([id, id, id]);
      expect(calls).toBe(0);
    },
  );
});

describe('the breaker in Redis under concurrency', () => {
  async function connections(count: number): Promise<Redis[]> {
    const conns = Array.from({ length: count }, () => connect());
    onCleanup(() => conns.forEach((c) => c.disconnect()));
    await Promise.all(conns.map((c) => c.ping()));
    return conns;
  }

  it('simultaneous trips make one transition', async () => {
    const name = cleanedQueueName(redis, 'brk-cas');
    const options = parseBreakerOptions({ failureRate: 0.5, minimumRequests: 10 });
    const watch = await watchTransitions(name);
    const conns = await connections(20);
    for (const key of ['k1', 'k2', 'k3']) {
      const now = Date.now();
      // Each batch alone fills the window with failures: every caller would trip it.
      const results = await Promise.all(
        conns.map((c) =>
          new BreakerStore(c, name, options).record(
            key,
            { successes: 0, failures: 10, trailingFailures: 10 },
            now,
          ),
        ),
      );
      await watch.sync();
      expect(results.filter((m) => m !== undefined)).toHaveLength(1);
      expect(watch.transitions(key)).toEqual(['opened']);
      const store = new BreakerStore(redis, name, options);
      const { state, version } = await store.read(key);
      expect(state).toMatchObject({ phase: 'open', trips: 1, openedAt: now });
      expect(version).toBe(1);
      expect((await store.status(key, now)).window.total).toBe(200);
    }
  });

  it('isolating a tripped breaker is published, so that workers learn at once', async () => {
    const name = cleanedQueueName(redis, 'brk-isolate');
    const options = parseBreakerOptions({ minimumRequests: 1 });
    const watch = await watchTransitions(name);
    const store = new BreakerStore(redis, name, options);
    const now = Date.now();
    await store.record('k', { successes: 0, failures: 1, trailingFailures: 1 }, now);
    const message = await store.forceOpen('k', now + 10);
    await watch.sync();
    expect((await store.read('k')).state).toMatchObject({ phase: 'isolated' });
    // Without a message the workers keep the old halfOpenAt until their next reload.
    expect(message?.state.phase).toBe('isolated');
    expect(watch.seen.filter((m) => m.key === 'k').map((m) => m.state.phase)).toEqual([
      'open',
      'isolated',
    ]);
  });

  it('never admits more than halfOpenProbes probes, however many ask at once', async () => {
    const name = cleanedQueueName(redis, 'brk-admit');
    const options = parseBreakerOptions({
      halfOpenProbes: 3,
      minimumRequests: 1,
      openMs: 1_000,
      probeTimeoutMs: 5_000,
    });
    const watch = await watchTransitions(name);
    const conns = await connections(50);
    const key = 'endpoint-1';
    const trippedAt = Date.now();
    await new BreakerStore(redis, name, options).record(
      key,
      { successes: 0, failures: 1, trailingFailures: 1 },
      trippedAt,
    );
    const ask = async (round: string, now: number) => {
      const answers = await Promise.all(
        conns.map((c, i) => new BreakerStore(c, name, options).admit(key, `${round}-${i}`, now)),
      );
      return answers.map((a) => a.admission);
    };

    // Open, past halfOpenAt: 50 at once race for the half-open transition and 3 slots.
    const firstAt = trippedAt + 1_000;
    const first = await ask('a', firstAt);
    const probes = first.filter((a) => a.kind === 'probe');
    expect(probes).toHaveLength(3);
    for (const other of first.filter((a) => a.kind !== 'probe')) {
      expect(other).toEqual({ kind: 'reject', retryAt: firstAt + options.halfOpenRetryMs });
    }
    await watch.sync();
    expect(watch.transitions(key)).toEqual(['opened', 'half-open']);
    const store = new BreakerStore(redis, name, options);
    const { state } = await store.read(key);
    expect(state.phase).toBe('half-open');
    expect(Object.keys(state.probes).sort()).toEqual(
      probes.map((p) => (p.kind === 'probe' ? p.probeId : '')).sort(),
    );

    // Half-open with every lease expired (their workers died): again exactly 3.
    const second = await ask('b', firstAt + options.probeTimeoutMs);
    expect(second.filter((a) => a.kind === 'probe')).toHaveLength(3);
    expect(Object.keys((await store.read(key)).state.probes)).toHaveLength(3);
  });
});

describe('the retry budget', () => {
  it('a token bucket of 500 grants exactly 100 retries of cost 5, then denies', async () => {
    const name = cleanedQueueName(redis, 'brk-bucket');
    const options = parseBudgetOptions({ capacity: 500, retryCost: 5 });
    const conns = Array.from({ length: 10 }, () => connect());
    onCleanup(() => conns.forEach((c) => c.disconnect()));
    const now = Date.now();
    const granted = await Promise.all(
      Array.from({ length: 120 }, (_, i) =>
        new BudgetStore(conns[i % 10]!, name, options).take(5, now),
      ),
    );
    expect(granted.filter(Boolean)).toHaveLength(100);
    const budget = new BudgetStore(redis, name, options);
    expect(await budget.status(now)).toEqual({
      kind: 'token-bucket',
      tokens: 0,
      capacity: 500,
      denied: 20,
    });
    // Refunds never fill it past capacity.
    await budget.settle(10_000, 0, now);
    expect(await budget.status(now)).toMatchObject({ tokens: 500 });
  });

  it(
    'through the worker: a retry costs 5, a timeout retry 10, a success refunds 1 or the retry’s cost',
    {
      timeout: 30_000,
    },
    async () => {
      const name = cleanedQueueName(redis, 'brk-refund');
      const budget = new BudgetStore(redis, name, parseBudgetOptions({}));
      const seen: string[] = [];
      const worker = startWorker(name, failingAsAsked, {
        budget: { kind: 'token-bucket' },
        // Long enough that the retry's refund cannot land before the tokens are read.
        policy: { strategy: 'fixed', baseMs: 500, capMs: 500, maxAttempts: 5 },
      });
      await worker.waitUntilReady();
      const queue = queueFor(name);
      const tokens = async () => {
        const status = await budget.status(Date.now());
        return status.kind === 'token-bucket' ? status.tokens : NaN;
      };
      const run = async (mode: Data['mode']) => {
        const scheduled =
          mode === 'ok'
            ? Promise.resolve()
            : new Promise<void>((resolve) => worker.once('retry:scheduled', () => resolve()));
        const done = new Promise<void>((resolve) => worker.once('job:completed', () => resolve()));
        await queue.add('call', { mode });
        if (mode !== 'ok') {
          await scheduled;
          seen.push(`${mode} retrying: ${await tokens()}`);
        }
        await done;
        await worker.gate.flush();
        seen.push(`${mode} done: ${await tokens()}`);
      };

      await run('fail-once');
      await run('timeout-once');
      await budget.take(20, Date.now());
      await run('ok');
      expect(seen).toEqual([
        'fail-once retrying: 495',
        'fail-once done: 500',
        'timeout-once retrying: 490',
        'timeout-once done: 500',
        'ok done: 481',
      ]);
    },
  );

  it(
    'when empty with onEmpty delay-to-cap, a retry is pushed to the policy’s cap',
    { timeout: 30_000 },
    async () => {
      const name = cleanedQueueName(redis, 'brk-empty');
      const budget = new BudgetStore(redis, name, parseBudgetOptions({}));
      await budget.take(500, Date.now());
      const exhausted: string[] = [];
      const worker = startWorker(name, failingAsAsked, {
        budget: { kind: 'token-bucket', onEmpty: 'delay-to-cap' },
        policy: { strategy: 'full-jitter', baseMs: 20, capMs: 300, maxAttempts: 5 },
      });
      worker.on('budget:exhausted', (e) => exhausted.push(e.action));
      await worker.waitUntilReady();
      const queue = queueFor(name);
      const scheduled = new Promise<number>((resolve) =>
        worker.once('retry:scheduled', (e) => resolve(e.delayMs)),
      );
      const done = new Promise<void>((resolve) => worker.once('job:completed', () => resolve()));
      const { id } = await queue.add('call', { mode: 'fail-once' });
      expect(await scheduled).toBeGreaterThanOrEqual(300);
      expect(exhausted).toEqual(['delay-to-cap']);
      await done;
      const record = (await readState(name, id))!.history.find((r) => r.outcome === 'failed')!;
      expect(record).toMatchObject({ decision: 'retry', delaySource: 'budget' });
      expect(record.delayMs).toBeGreaterThanOrEqual(300);
      // The worker asked once and was denied once.
      expect(await budget.status(Date.now())).toMatchObject({ tokens: 0, denied: 1 });
    },
  );

  it(
    'a retry the empty budget denied refunds nothing when it succeeds',
    {
      timeout: 30_000,
    },
    async () => {
      const name = cleanedQueueName(redis, 'brk-denied');
      const budget = new BudgetStore(redis, name, parseBudgetOptions({}));
      await budget.take(500, Date.now());
      const worker = startWorker(name, failingAsAsked, {
        budget: { kind: 'token-bucket' },
        policy: { strategy: 'full-jitter', baseMs: 20, capMs: 300, maxAttempts: 5 },
      });
      await worker.waitUntilReady();
      const queue = queueFor(name);
      const done = new Promise<void>((resolve) => worker.once('job:completed', () => resolve()));
      await queue.add('call', { mode: 'fail-once' });
      await done;
      await worker.gate.flush();
      const status = await budget.status(Date.now());
      // The retry took no token; its success must not hand back the 5 it never paid
      // (at most the 1 any success may refund).
      expect(status.kind === 'token-bucket' ? status.tokens : NaN).toBeLessThanOrEqual(1);
    },
  );

  it(
    'when empty with onEmpty dead-letter, the job dies with budget-exhausted',
    {
      timeout: 30_000,
    },
    async () => {
      const name = cleanedQueueName(redis, 'brk-dead');
      const budget = new BudgetStore(redis, name, parseBudgetOptions({}));
      await budget.take(500, Date.now());
      const worker = startWorker(name, failingAsAsked, {
        budget: { kind: 'token-bucket', onEmpty: 'dead-letter' },
        policy: { strategy: 'full-jitter', baseMs: 20, capMs: 300, maxAttempts: 5 },
      });
      await worker.waitUntilReady();
      const queue = queueFor(name);
      const dead = new Promise<string>((resolve) =>
        worker.once('job:dead-lettered', (e) => resolve(e.record.reason)),
      );
      await queue.add('call', { mode: 'fail-once' });
      expect(await dead).toBe('budget-exhausted');
      expect((await queue.counts()).dead).toBe(1);
    },
  );

  it('a ratio budget of 0.1 with minRetries 0 grants exactly 10 retries per 100 requests', async () => {
    const name = cleanedQueueName(redis, 'brk-ratio');
    const options = parseBudgetOptions({ kind: 'ratio', ratio: 0.1, minRetries: 0 });
    const budget = new BudgetStore(redis, name, options);
    const now = Date.now();
    // No requests yet, no floor: nothing to grant.
    expect(await budget.take(1, now)).toBe(false);
    await budget.settle(0, 100, now);
    const granted: boolean[] = [];
    for (let i = 0; i < 20; i += 1) granted.push(await budget.take(1, now));
    expect(granted.filter(Boolean)).toHaveLength(10);
    expect(granted.slice(0, 10).every(Boolean)).toBe(true);
    expect(await budget.status(now)).toMatchObject({ kind: 'ratio', requests: 100, retries: 10 });
  });
});

/** Fails the first attempt as `job.data.mode` says (503, or a timeout), then succeeds. */
async function failingAsAsked(job: { attempt: number; data: Data }): Promise<string> {
  if (job.attempt === 1 && job.data.mode === 'fail-once') throw new DependencyError(503);
  if (job.attempt === 1 && job.data.mode === 'timeout-once') {
    throw new DOMException('the dependency did not answer in time', 'TimeoutError');
  }
  return 'ok';
}

describe('requeue breaker (CLI)', () => {
  interface Run {
    code: number | null;
    stdout: string;
    stderr: string;
  }

  function cli(...args: string[]): Promise<Run> {
    return new Promise((resolve, reject) => {
      const child = spawn(
        process.execPath,
        ['--import', 'tsx', 'src/cli/main.ts', ...args, '--redis', redisUrl()],
        { cwd: repoRoot, env: { ...process.env, LOG_LEVEL: 'silent' } },
      );
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });
  }

  interface StatusJson {
    queue: string;
    breakers: {
      key: string;
      state: string;
      isolated: boolean;
      failureRate: number;
      failures: number;
      total: number;
      consecutiveFailures: number;
      openedAt: number | null;
      halfOpenAt: number | null;
      probesInFlight: number;
      trips: number;
      windowMs: number | null;
      buckets: number | null;
    }[];
    budget: { kind: string; tokens?: number; capacity?: number; denied?: number };
  }

  async function status(name: string, ...extra: string[]): Promise<StatusJson> {
    const run = await cli('breaker', 'status', name, '--json', ...extra);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    return JSON.parse(run.stdout) as StatusJson;
  }

  it(
    'status shows state, failure rate, volume, openedAt, halfOpenAt, probes and budget tokens',
    {
      timeout: 60_000,
    },
    async () => {
      const name = cleanedQueueName(redis, 'brk-cli');
      // A window that outlives the slowest run of this test's CLI calls (a few s each).
      const breakerFlag = breakerJson({ openMs: 30_000, minimumRequests: 10, windowMs: 600_000 });
      const store = new BreakerStore(redis, name, parseBreakerOptions(JSON.parse(breakerFlag)));
      const budget = new BudgetStore(redis, name, parseBudgetOptions({}));

      // A queue with no key at all is not "closed": it is unknown (exit 2, the known ones named).
      const unknown = await cli('breaker', 'status', name);
      expect(unknown.code).toBe(2);
      expect(unknown.stderr).toMatch(`no queue "${name}" on this Redis`);
      // Known (one BullMQ key) but with no breaker state yet: closed, as before.
      await redis.hset(`${bullPrefixOf(redis, name)}:${name}:meta`, 'version', 'brk-cli');
      const fresh = await status(name);
      expect(fresh.breakers).toEqual([
        expect.objectContaining({
          key: queueBreakerKey,
          state: 'closed',
          failureRate: 0,
          total: 0,
          openedAt: null,
          halfOpenAt: null,
          probesInFlight: 0,
        }),
      ]);
      expect(fresh.budget).toEqual({ kind: 'token-bucket', tokens: 500, capacity: 500, denied: 0 });

      const now = Date.now();
      await store.record(queueBreakerKey, { successes: 2, failures: 8, trailingFailures: 8 }, now);
      for (let i = 0; i < 3; i += 1) await budget.take(5, now);
      const open = await status(name, '--breaker', breakerFlag);
      expect(open.breakers).toEqual([
        {
          key: queueBreakerKey,
          state: 'open',
          isolated: false,
          failureRate: 0.8,
          failures: 8,
          total: 10,
          consecutiveFailures: 8,
          openedAt: now,
          halfOpenAt: now + 30_000,
          probesInFlight: 0,
          trips: 1,
          // The live window's own geometry, whatever the caller's options.
          windowMs: 600_000,
          buckets: 10,
        },
      ]);
      expect(open.budget).toMatchObject({ tokens: 485, capacity: 500 });

      const admitted = await store.admit(queueBreakerKey, 'probe-1', now + 30_000);
      expect(admitted.admission.kind).toBe('probe');
      const half = await status(name, '--breaker', breakerFlag);
      expect(half.breakers[0]).toMatchObject({ state: 'half-open', probesInFlight: 1 });

      const table = await cli('breaker', 'status', name, '--breaker', breakerFlag);
      expect(table.code).toBe(0);
      expect(table.stdout).toMatch(/half-open/);
      expect(table.stdout).toMatch(/8\/10/);
      expect(table.stdout).toContain('budget: 485/500 tokens');

      const closed = await cli('breaker', 'close', name);
      expect(closed.code).toBe(0);
      expect(closed.stdout).toBe(`closed ${name}/${queueBreakerKey}\n`);
      expect((await status(name)).breakers[0]).toMatchObject({
        state: 'closed',
        total: 0,
        trips: 0,
      });

      const opened = await cli('breaker', 'open', name, '--key', 'endpoint-7');
      expect(opened.code).toBe(0);
      const isolated = await status(name, '--key', 'endpoint-7');
      expect(isolated.breakers).toEqual([
        expect.objectContaining({
          key: 'endpoint-7',
          state: 'open',
          isolated: true,
          halfOpenAt: null,
        }),
      ]);
    },
  );

  it(
    'open isolates a running worker (it stops taking jobs); close resumes it',
    {
      timeout: 60_000,
    },
    async () => {
      const name = cleanedQueueName(redis, 'brk-cli-iso');
      const dep = await dependency();
      const worker = spawnCliWorker(
        name,
        dep,
        breakerJson({ halfOpenRetryMs: 300, isolatedRetryMs: 300 }),
      );
      await worker.waitFor('worker started');
      const queue = queueFor(name);
      await queue.addBulk(jobs(3));
      await until(() => dep.count() === 3, 'the worker to run the first 3 jobs');

      const opened = await cli('breaker', 'open', name);
      expect(opened.code).toBe(0);
      expect(opened.stdout).toBe(`opened ${name}/${queueBreakerKey} (isolated)\n`);
      await worker.waitFor('breaker opened');

      const held = await queue.addBulk(jobs(10, (i) => ({ i: 100 + i })));
      // Nothing to wait on for "nothing happens": watch for several halfOpenRetryMs.
      await delay(2_000);
      expect(dep.count()).toBe(3);
      const deferrals = (await Promise.all(held.map((j) => readState(name, j.id)))).reduce(
        (sum, s) => sum + (s?.deferrals ?? 0),
        0,
      );
      // One job may be taken by the fetch that was already waiting when the breaker
      // opened; after that an isolated worker must take none.
      expect
        .soft(deferrals, 'jobs an isolated worker took (and deferred) while it should be idle')
        .toBeLessThanOrEqual(1);

      const closed = await cli('breaker', 'close', name);
      expect(closed.code).toBe(0);
      await worker.waitFor('breaker closed');
      await until(() => dep.count() === 13, 'the 10 held jobs to run after close');
      await until(
        async () => (await queue.counts()).completed === 13,
        'all 13 jobs to complete',
        10_000,
        100,
      );
    },
  );

  /** `requeue worker` in a child process, its pino lines read for their `msg`. */
  function spawnCliWorker(name: string, dep: Dependency, breaker: string) {
    const child: ChildProcess = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        'src/cli/main.ts',
        'worker',
        name,
        '--handler',
        'test/fixtures/breaker-handler.ts',
        '--breaker',
        breaker,
        '--concurrency',
        '2',
        '--redis',
        redisUrl(),
      ],
      {
        cwd: repoRoot,
        env: { ...process.env, LOG_LEVEL: 'info', DEPENDENCY_URL: dep.url },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const messages: string[] = [];
    let stderr = '';
    let buffer = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      buffer += chunk.toString();
      const lines = buffer.split('\n');
      buffer = lines.pop() ?? '';
      for (const line of lines) {
        try {
          messages.push(String((JSON.parse(line) as { msg?: unknown }).msg));
        } catch {
          // Not a log line.
        }
      }
    });
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    onCleanup(async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(timer);
      }
    });
    return {
      messages,
      waitFor: (msg: string) =>
        until(
          () => messages.includes(msg),
          () => `the worker to log "${msg}" (logged: ${messages.join(' | ')}; stderr: ${stderr})`,
          20_000,
        ),
    };
  }
});
