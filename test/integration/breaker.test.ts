import { Job } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { parseBreakerOptions } from '../../src/policy/breaker/breaker-options.js';
import { BreakerStore } from '../../src/redis/breaker-store.js';
import { callDependency } from '../fixtures/breaker-dependency.js';
import { cleanedQueueName, redisUrl } from '../harness/redis.js';
import { connectForFile, redis } from '../harness/file-redis.js';
import {
  GRACE_MS,
  generousPolicy,
  queueFor,
  dependency,
  startWorker,
  fleet,
  until,
  delay,
  watchTransitions,
  readState,
  startedBetween,
  jobs,
  breakerJson,
  type OpenState,
} from './breaker-helpers.js';

connectForFile();

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
