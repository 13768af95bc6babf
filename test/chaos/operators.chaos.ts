/**
 * Operators under crashes (issue 10): `requeue dlq replay` and `requeue dlq
 * purge`, each a real CLI process SIGKILLed half-way and then run again to
 * the end. Each dead job is replayed exactly once (it comes back once and its
 * work runs once; the DLQ ends empty) or purged exactly once (the second run
 * purges exactly what the first left).
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { requeueKeys } from '../../src/redis/keys.js';
import type { RedisServerHandle } from '../../src/redis/redis-server.js';
import { spawnTs, runTs, type TsChild } from '../harness/child.js';
import { seedDead } from '../harness/dlq.js';
import { settleAndCheck, quiesce } from '../model/check.js';
import { allDead, observe } from '../model/dead-records.js';
import { Model } from '../model/model.js';
import type { Outcome } from '../model/protocol.js';
import { RealSystem, type RunConfig } from '../model/system.js';
import {
  addJobs,
  chaosRedis,
  chaosSeed,
  checkDelays,
  duplicatedSideEffects,
  envInt,
  report,
  sleep,
} from './harness.js';

const seed = chaosSeed();
const replayJobs = envInt('CHAOS_OPS_REPLAY_JOBS', 4_000);
const purgeRecords = envInt('CHAOS_OPS_PURGE_RECORDS', 10_000);
const config: RunConfig = {
  workers: 2,
  concurrency: 25,
  maxAttempts: 3,
  baseMs: 10,
  breaker: false,
};

let server: RedisServerHandle;
beforeAll(async () => {
  server = await chaosRedis(4);
});
afterAll(async () => {
  await server?.stop();
});

/**
 * Runs a CLI command and SIGKILLs it once `count()` has fallen to half of
 * `total` or less; returns how far it got when it died.
 */
async function killHalfway(
  args: string[],
  count: () => Promise<number>,
  total: number,
): Promise<{ child: TsChild; leftAtKill: number; exitedByItself: boolean }> {
  const child = spawnTs('src/cli/main.ts', args);
  for (;;) {
    const left = await count();
    const exited = child.proc.exitCode !== null || child.proc.signalCode !== null;
    if (exited) return { child, leftAtKill: left, exitedByItself: true };
    if (left <= total / 2) {
      await child.kill('SIGKILL');
      return { child, leftAtKill: await count(), exitedByItself: false };
    }
    await sleep(2);
  }
}

it(`replays ${replayJobs} dead jobs exactly once though the replay is SIGKILLed half-way and run again`, async () => {
  const real = new RealSystem(server, config);
  const model = new Model(config);
  // Dies on its first life, succeeds once replayed.
  const plan: Outcome[][] = [['permanent'], ['ok']];
  try {
    await real.start();
    const startedAt = Date.now();
    const tally = await addJobs(model, real, replayJobs, () => plan);
    expect(await quiesce(real, 120_000)).toBe(true);
    const dead = await allDead(real.dlq);
    expect(dead.length).toBe(replayJobs);
    observe(model, dead);

    const args = ['dlq', 'replay', real.name, '--all', '--rate', '1000', '--redis', server.url];
    const first = await killHalfway(args, () => real.dlq.count({}), replayJobs);
    const second = await runTs('src/cli/main.ts', [...args, '--json'], {}, 120_000);
    expect(second.code, second.stderr).toBe(0);
    const result = JSON.parse(second.stdout) as { done: number; total: number };
    for (const job of model.jobs.values()) job.replays = 1;

    const violations = await settleAndCheck(model, real, 120_000);
    const seconds = (Date.now() - startedAt) / 1000;
    const runs = await real.runs();
    const okRuns = runs.filter((r) => r.outcome === 'ok');
    const okSeqs = new Set(okRuns.map((r) => r.seq));
    const delays = await checkDelays(real, config.baseMs);
    const completed = await real.queue.bull.getCompletedCount();
    const replayedBeforeKill = replayJobs - first.leftAtKill;
    report({
      suite: 'operators-replay',
      seed,
      enqueued: tally.resolved,
      completed,
      dead: await real.dlq.count({}),
      lost: replayJobs - okSeqs.size,
      duplicatedSideEffects: duplicatedSideEffects(runs),
      kills: first.exitedByItself ? 0 : 1,
      crashes: real.unexpectedExits(),
      jobsPerSec: Math.round(replayJobs / seconds),
      seconds: Math.round(seconds * 10) / 10,
      replayedBeforeKill,
      replayedBySecondRun: result.done,
      timeouts: delays.timeouts,
      violations: violations.length + delays.violations.length,
    });
    expect(first.exitedByItself).toBe(false);
    expect(replayedBeforeKill).toBeGreaterThan(0);
    expect(replayedBeforeKill).toBeLessThan(replayJobs);
    expect(violations.slice(0, 20)).toEqual([]);
    // The second run replays exactly what the first left: no death twice, none skipped.
    expect(result).toMatchObject({ done: first.leftAtKill, total: first.leftAtKill });
    expect(await real.dlq.count({})).toBe(0);
    expect(completed).toBe(replayJobs);
    // Each job's work ran once after its replay (again only where a starved
    // machine let the attempt overrun its timeout, recorded as such).
    expect(okSeqs.size).toBe(replayJobs);
    expect(okRuns.length).toBeLessThanOrEqual(replayJobs + delays.timeouts);
    expect(delays.violations.slice(0, 20)).toEqual([]);
    expect(await real.queue.bull.getFailedCount()).toBe(0);
  } finally {
    await real.stop();
  }
});

it(`purges ${purgeRecords} dead jobs exactly once though the purge is SIGKILLed half-way and run again`, async () => {
  const real = new RealSystem(server, { ...config, workers: 0 });
  try {
    const startedAt = Date.now();
    // Stored as the dead-letter script stores them, many at a time.
    for (let i = 0; i < purgeRecords; i += 1_000) {
      await Promise.all(
        Array.from({ length: Math.min(1_000, purgeRecords - i) }, (_, k) =>
          seedDead(real.admin, {
            id: `dead-${i + k}`,
            name: 'chaos',
            data: { n: i + k },
            opts: {},
            source: real.name,
            reason: 'permanent-error',
            message: 'the model said permanent',
            attempts: 1,
            deadAt: startedAt + i + k,
            history: [],
            replays: 0,
          }),
        ),
      );
    }
    // A job of the source queue the purge must not touch.
    await real.queue.add('chaos', { seq: 0, plan: [['ok']] });
    expect(await real.dlq.count({})).toBe(purgeRecords);

    const args = ['dlq', 'purge', real.name, '--all', '--redis', server.url];
    const first = await killHalfway(args, () => real.dlq.count({}), purgeRecords);
    const second = await runTs('src/cli/main.ts', [...args, '--json'], {}, 120_000);
    expect(second.code, second.stderr).toBe(0);
    const result = JSON.parse(second.stdout) as { done: number; total: number };
    const seconds = (Date.now() - startedAt) / 1000;
    const left = await real.dlq.count({});
    const leftKeys = (await real.admin.keys(`${requeueKeys(real.name).deadRecordPrefix}*`)).length;
    report({
      suite: 'operators-purge',
      seed,
      enqueued: purgeRecords,
      completed: 0,
      dead: left,
      lost: 0,
      duplicatedSideEffects: 0,
      kills: first.exitedByItself ? 0 : 1,
      crashes: 0,
      jobsPerSec: Math.round(purgeRecords / seconds),
      seconds: Math.round(seconds * 10) / 10,
      purgedBeforeKill: purgeRecords - first.leftAtKill,
      purgedBySecondRun: result.done,
      deadHashesLeft: leftKeys,
    });
    expect(first.exitedByItself).toBe(false);
    expect(first.leftAtKill).toBeGreaterThan(0);
    expect(first.leftAtKill).toBeLessThan(purgeRecords);
    expect(result).toMatchObject({ done: first.leftAtKill, total: first.leftAtKill });
    expect(left).toBe(0);
    expect(leftKeys).toBe(0);
    expect(await real.queue.bull.getWaitingCount()).toBe(1);
  } finally {
    await real.stop();
  }
});
