/**
 * Worker crashes (issue 10): CHAOS_CRASH_JOBS jobs (10,000), each with an
 * idempotency key, through 4 worker processes that are SIGKILLed at random
 * moments (at least CHAOS_CRASH_KILLS times) and started again. Conservation
 * holds (completed + dead = added, each in one place, no DLQ duplicate, the
 * failed set empty, no job run more often than its attempts and the crashes
 * that hit it allow); the side effects run twice (an `ok` run of the same key
 * more than once: handlers are at least once) are counted and reported.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { RedisServerHandle } from '../../src/redis/redis-server.js';
import { settleAndCheck } from '../model/check.js';
import { Model } from '../model/model.js';
import { RealSystem, type RunConfig } from '../model/system.js';
import {
  addJobs,
  chaosRedis,
  chaosSeed,
  checkDelays,
  duplicatedSideEffects,
  envInt,
  mixedPlan,
  places,
  planRandom,
  report,
  sleep,
} from './harness.js';

const jobs = envInt('CHAOS_CRASH_JOBS', 10_000);
const minKills = envInt('CHAOS_CRASH_KILLS', 40);
const seed = chaosSeed();
const config: RunConfig = {
  workers: 4,
  concurrency: envInt('CHAOS_CONCURRENCY', 25),
  // Crashes cost attempts (a lost attempt is recorded as stalled).
  maxAttempts: 8,
  baseMs: 10,
  breaker: false,
};

let server: RedisServerHandle;
beforeAll(async () => {
  server = await chaosRedis(1);
});
afterAll(async () => {
  await server?.stop();
});

it(`conserves ${jobs} keyed jobs while 4 workers are SIGKILLed at random at least ${minKills} times`, async () => {
  const real = new RealSystem(server, config);
  const model = new Model(config);
  const random = planRandom(seed);
  const killRandom = planRandom(seed + 1);
  let kills = 0;
  let adding = true;
  try {
    await real.start();
    const startedAt = Date.now();
    const pending = async () => {
      const counts = await real.queue.bull.getJobCounts('wait', 'prioritized', 'delayed', 'active');
      return Object.values(counts).reduce((a, b) => a + b, 0);
    };
    // One killer per worker: it waits a random 0.3–2.3 s, SIGKILLs its worker
    // (whatever it is doing) and starts a new one, until enough kills were
    // made and the adds are done, or nothing is left to interrupt.
    const killer = async (index: number) => {
      for (;;) {
        await sleep(300 + Math.floor(killRandom() * 2_000));
        if (!adding && (kills >= minKills || (await pending()) === 0)) return;
        model.disturbed(await real.crash(index));
        kills += 1;
      }
    };
    const killers = Promise.all(Array.from({ length: config.workers }, (_, i) => killer(i)));
    const tally = await addJobs(model, real, jobs, () => mixedPlan(random), { keyed: true });
    adding = false;
    await killers;
    const violations = await settleAndCheck(model, real, 300_000);
    const seconds = (Date.now() - startedAt) / 1000;
    const { completed, dead } = await places(real);
    const runs = await real.runs();
    const duplicated = duplicatedSideEffects(runs);
    const delays = await checkDelays(real, config.baseMs);
    report({
      suite: 'crash',
      seed,
      enqueued: tally.resolved,
      completed,
      dead,
      lost: tally.resolved - completed - dead,
      duplicatedSideEffects: duplicated,
      kills,
      crashes: real.unexpectedExits(),
      jobsPerSec: Math.round(tally.resolved / seconds),
      seconds: Math.round(seconds * 10) / 10,
      concurrency: config.concurrency,
      handlerRuns: runs.length,
      retries: delays.retries,
      stalls: delays.stalls,
      timeouts: delays.timeouts,
      violations: violations.length + delays.violations.length,
    });
    expect(violations.slice(0, 50)).toEqual([]);
    expect(delays.violations.slice(0, 50)).toEqual([]);
    expect(tally.rejected).toBe(0);
    expect(completed + dead).toBe(jobs);
    expect(await real.queue.bull.getFailedCount()).toBe(0);
    expect(kills).toBeGreaterThanOrEqual(Math.min(minKills, 10));
    expect(real.unexpectedExits()).toBe(0);
    // At least once, not exactly once: only a job running when its worker
    // was killed runs again, so at most `concurrency` per kill (plus attempts
    // a starved machine let overrun their timeout, recorded as such).
    expect(duplicated).toBeLessThanOrEqual(kills * config.concurrency + delays.timeouts);
  } finally {
    adding = false;
    await real.stop();
  }
});
