/**
 * Redis faults (issue 10), on a private redis-server with AOF and
 * `appendfsync always`, while a producer adds jobs (30 % retried, 5 % dead)
 * and 2 worker processes run them:
 * - Redis SIGKILLed in the middle of adds and retries and restarted from its
 *   AOF, CHAOS_REDIS_KILLS times (3);
 * - Redis frozen (SIGSTOP) for CHAOS_REDIS_OUTAGE_MS (10 s), then thawed;
 * - Redis SIGKILLed and started again only after CHAOS_REDIS_OUTAGE_MS.
 * No add that resolved is lost and none became two jobs (the model suite's
 * end check), no worker process exits, and work resumes after each fault by
 * itself (the workers' own reconnect backoff, `src/policy/reconnect.ts`).
 *
 * A second test measures what `appendfsync everysec` loses when the Redis
 * process (not its host) is SIGKILLed in the middle of adds.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createQueue } from '../../src/index.js';
import type { RedisServerHandle } from '../../src/redis/redis-server.js';
import { settleAndCheck } from '../model/check.js';
import { Model } from '../model/model.js';
import { ensureReader, RealSystem, type RunConfig } from '../model/system.js';
import {
  addJobs,
  chaosRedis,
  chaosSeed,
  duplicatedSideEffects,
  envInt,
  mixedPlan,
  places,
  planRandom,
  report,
  sleep,
} from './harness.js';

const seed = chaosSeed();
const restarts = envInt('CHAOS_REDIS_KILLS', 3);
const outageMs = envInt('CHAOS_REDIS_OUTAGE_MS', 10_000);
const config: RunConfig = {
  workers: 2,
  concurrency: 10,
  // A frozen or dead Redis lets locks expire: the attempts cut short count.
  maxAttempts: 10,
  baseMs: 10,
  breaker: false,
};

let server: RedisServerHandle;
let everysec: RedisServerHandle;
beforeAll(async () => {
  server = await chaosRedis(2, 'always');
  everysec = await chaosRedis(3, 'everysec');
});
afterAll(async () => {
  await Promise.allSettled([server?.stop(), everysec?.stop()]);
});

it(`loses no resolved add and doubles none while Redis is SIGKILLed ${restarts}×, frozen ${outageMs} ms and down ${outageMs} ms; workers carry on`, async () => {
  const real = new RealSystem(server, config);
  const model = new Model(config);
  const random = planRandom(seed);
  let producing = true;
  const resumes: Record<string, number> = {};
  try {
    await real.start();
    const startedAt = Date.now();
    // About 100 adds a second, for as long as the faults last.
    const producer = addJobs(model, real, Number.MAX_SAFE_INTEGER, () => mixedPlan(random), {
      inFlight: 5,
      paceMs: 50,
      stop: () => !producing,
    });
    /** How long after Redis answers again the workers complete a job. */
    const resumed = async (label: string) => {
      const back = Date.now();
      const before = (await places(real)).completed;
      for (;;) {
        if ((await places(real)).completed > before) break;
        if (Date.now() - back > 60_000) throw new Error(`no job completed within 60 s of ${label}`);
        await sleep(20);
      }
      resumes[label] = Date.now() - back;
    };

    await sleep(3_000);
    for (let i = 1; i <= restarts; i += 1) {
      await real.restartRedis();
      model.disturbed('all');
      await resumed(`kill ${i}`);
      await sleep(2_000);
    }

    server.signal('SIGSTOP');
    await sleep(outageMs);
    server.signal('SIGCONT');
    model.disturbed('all');
    await resumed('freeze');
    await sleep(2_000);

    await server.kill();
    await sleep(outageMs);
    await server.restart();
    await ensureReader(real.admin);
    model.disturbed('all');
    await resumed('outage');
    await sleep(2_000);

    producing = false;
    const tally = await producer;
    const violations = await settleAndCheck(model, real, 120_000);
    const seconds = (Date.now() - startedAt) / 1000;
    const { completed, dead } = await places(real);
    const runs = await real.runs();
    const uncertain = [...model.jobs.values()].filter((j) => j.uncertain).length;
    const lost = violations.filter((v) => v.includes(' is nowhere')).length;
    const doubled = violations.filter((v) => / is in \d+ places| is in .* and /.test(v)).length;
    report({
      suite: 'redis',
      seed,
      enqueued: tally.resolved,
      completed,
      dead,
      lost,
      duplicatedJobs: doubled,
      duplicatedSideEffects: duplicatedSideEffects(runs),
      kills: restarts + 1,
      freezes: 1,
      outageMs,
      crashes: real.unexpectedExits(),
      jobsPerSec: Math.round(tally.resolved / seconds),
      seconds: Math.round(seconds * 10) / 10,
      addsRejected: tally.rejected,
      addsUncertain: uncertain,
      resumedAfterMs: resumes,
      violations: violations.length,
    });
    expect(violations.slice(0, 20)).toEqual([]);
    // An add waits for Redis (the connection queues it and re-sends it after a
    // reconnect, with the id the producer chose), so none rejects here.
    expect(tally.rejected).toBe(0);
    expect(completed + dead).toBe(tally.resolved);
    expect(await real.queue.bull.getFailedCount()).toBe(0);
    expect(real.unexpectedExits()).toBe(0);
    for (const ms of Object.values(resumes)) expect(ms).toBeLessThan(30_000);
  } finally {
    producing = false;
    await real.stop();
  }
});

it('appendfsync everysec: a SIGKILL of the Redis process (its host still up) in the middle of adds', async () => {
  const queue = createQueue('everysec', { connection: everysec.url });
  const resolved: string[] = [];
  let rejected = 0;
  let producing = true;
  try {
    await queue.bull.waitUntilReady();
    const startedAt = Date.now();
    const lane = async () => {
      while (producing) {
        try {
          resolved.push((await queue.add('job', { n: resolved.length })).id);
        } catch {
          rejected += 1;
        }
      }
    };
    const lanes = Promise.all(Array.from({ length: 20 }, lane));
    await sleep(2_000);
    const beforeKill = resolved.length;
    await everysec.kill();
    await everysec.restart();
    await sleep(1_000);
    producing = false;
    await lanes;
    const seconds = (Date.now() - startedAt) / 1000;
    const exists = await Promise.all(
      resolved.map((id) => queue.bull.getJobState(id).then((state) => state !== 'unknown')),
    );
    const lost = exists.filter((e) => !e).length;
    const waiting = await queue.bull.getWaitingCount();
    report({
      suite: 'redis-everysec',
      seed,
      enqueued: resolved.length,
      completed: 0,
      dead: 0,
      lost,
      duplicatedSideEffects: 0,
      kills: 1,
      crashes: 0,
      jobsPerSec: Math.round(resolved.length / seconds),
      seconds: Math.round(seconds * 10) / 10,
      resolvedBeforeKill: beforeKill,
      waiting,
      addsRejected: rejected,
    });
    // A process crash loses nothing acknowledged (the kernel still has the
    // AOF's writes); only a crash of the host can lose the last second.
    expect(lost).toBe(0);
    expect(waiting).toBe(resolved.length);
  } finally {
    producing = false;
    await queue.close();
  }
});
