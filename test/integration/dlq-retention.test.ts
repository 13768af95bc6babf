/**
 * Issue 21, part 5: the DLQ's retention is applied on time — after a burst
 * of deaths, with no death at all (age), and by one pass at a time however
 * many workers run — and every removal is counted and logged. Real Redis,
 * real workers.
 */
import { Writable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { PermanentError } from '../../src/errors/permanent-error.js';
import { requeueKeys } from '../../src/redis/keys.js';
import { runScript } from '../../src/redis/scripts.js';
import { DeadLetterQueue } from '../../src/scheduler/dlq/dead-letter-queue.js';
import { trimBatch, trimLockMs } from '../../src/scheduler/dlq/retention-pass.js';
import { RequeueMetrics } from '../../src/scheduler/metrics.js';
import { createQueue } from '../../src/scheduler/queue.js';
import { RetentionKeeper, type SetTimer } from '../../src/scheduler/dlq/retention-keeper.js';
import { createWorker, type RequeueWorker } from '../../src/scheduler/requeue-worker.js';
import { ManualClock } from '../../src/util/fake-clock.js';
import { onCleanup } from '../harness/cleanup.js';
import { cleanQueue, connect, redisUrl, uniqueQueueName } from '../harness/redis.js';

const admin = connect();
afterAll(() => admin.disconnect());

/** A fixed reference time (2026-11-25T00:00:00Z): death times are derived from it. */
const t0 = Date.UTC(2026, 10, 25);

/** A warn-level logger whose lines the test reads. */
function capturedLogger() {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      done();
    },
  });
  const removedInLogs = (): { byAge: number; byCount: number; lines: number } => {
    let byAge = 0;
    let byCount = 0;
    let count = 0;
    for (const line of lines) {
      const entry = JSON.parse(line) as {
        msg?: string;
        removedByAge?: number;
        removedByCount?: number;
      };
      if (!entry.msg?.startsWith('DLQ retention removed')) continue;
      count += 1;
      byAge += entry.removedByAge ?? 0;
      byCount += entry.removedByCount ?? 0;
    }
    return { byAge, byCount, lines: count };
  };
  return { logger: createLogger({ level: 'warn', destination: sink }), lines, removedInLogs };
}

/** `n` dead records of queue `name`, dead at `deadAt + i`, written in pipelines. */
async function seedMany(name: string, n: number, deadAt: number): Promise<void> {
  const keys = requeueKeys(name);
  for (let from = 0; from < n; from += 1_000) {
    const pipeline = admin.pipeline();
    for (let i = from; i < Math.min(n, from + 1_000); i += 1) {
      const id = `d${String(i).padStart(7, '0')}`;
      pipeline.hset(keys.deadRecordPrefix + id, { name: 'job', data: '{}', gen: String(i + 1) });
      pipeline.zadd(keys.dead, deadAt + i, id);
    }
    await pipeline.exec();
  }
}

function setup(prefix: string) {
  const name = uniqueQueueName(prefix);
  const queue = createQueue(name, { connection: redisUrl() });
  const dlq = new DeadLetterQueue(name, { connection: redisUrl() });
  onCleanup(async () => {
    await dlq.close();
    await queue.close();
    await cleanQueue(admin, name);
  });
  return { name, queue, dlq };
}

/** Workers that dead-letter every job at once, counting deaths and what retention reports. */
function dyingWorkers(
  name: string,
  n: number,
  options: { maxCount: number; logger: ReturnType<typeof createLogger> },
) {
  const seen = { dead: 0, byAge: 0, byCount: 0, trims: 0, lastDeathAt: 0, trimmedAt: 0 };
  const workers: RequeueWorker[] = [];
  for (let i = 0; i < n; i += 1) {
    const worker = createWorker(
      name,
      async () => {
        throw new PermanentError('gone for good');
      },
      {
        connection: redisUrl(),
        logger: options.logger,
        concurrency: 50,
        retention: { maxCount: options.maxCount },
        policy: { strategy: 'fixed', baseMs: 10, capMs: 10, maxAttempts: 1 },
      },
    );
    worker.on('job:dead-lettered', () => {
      seen.dead += 1;
      seen.lastDeathAt = performance.now();
    });
    worker.on('dlq:trimmed', (e) => {
      seen.trims += 1;
      seen.byAge += e.byAge;
      seen.byCount += e.byCount;
      seen.trimmedAt = performance.now();
    });
    onCleanup(() => worker.close({ timeoutMs: 5_000 }));
    workers.push(worker);
  }
  return { workers, seen };
}

async function addJobs(queue: ReturnType<typeof createQueue>, n: number): Promise<void> {
  for (let from = 0; from < n; from += 500)
    await queue.bull.addBulk(
      Array.from({ length: Math.min(500, n - from) }, (_, i) => ({
        name: 'x',
        data: { i: from + i },
      })),
    );
}

describe('DLQ retention on time (issue 21, part 5)', () => {
  it('a burst of 300 deaths with maxCount 100 ends at 100, counted and logged, with no later death (was: 300 kept, no log)', async () => {
    const t = setup('burst-300');
    const { logger, removedInLogs } = capturedLogger();
    const { workers, seen } = dyingWorkers(t.name, 1, { maxCount: 100, logger });
    const metrics = new RequeueMetrics();
    metrics.watch(workers[0]!);
    await addJobs(t.queue, 300);
    await expect.poll(() => seen.dead, { timeout: 60_000 }).toBe(300);
    // No job dies from here on: retention must still bring the DLQ down.
    await expect.poll(() => seen.byCount, { timeout: 20_000 }).toBe(200);
    expect(await t.dlq.count()).toBe(100);
    expect(seen.dead).toBe(300);
    expect(seen.byAge).toBe(0);
    expect(removedInLogs()).toMatchObject({ byAge: 0, byCount: 200 });
    const { body } = await metrics.render();
    expect(body).toContain(
      `requeue_dlq_retention_removed_total{queue="${t.name}",reason="count"} 200`,
    );
    console.log(
      `burst 300 / maxCount 100: 100 kept, last trim ${Math.round(seen.trimmedAt - seen.lastDeathAt)} ms after the last death`,
    );
  }, 90_000);

  it('a burst of 12,000 deaths over 3 workers with maxCount 10,000 ends at 10,000, each removal counted once (was: the tail of the burst kept)', async () => {
    const t = setup('burst-12k');
    const { logger, removedInLogs } = capturedLogger();
    const { workers, seen } = dyingWorkers(t.name, 3, { maxCount: 10_000, logger });
    const metrics = new RequeueMetrics();
    for (const worker of workers) metrics.watch(worker);
    await addJobs(t.queue, 12_000);
    await expect.poll(() => seen.dead, { timeout: 240_000, interval: 200 }).toBe(12_000);
    await expect.poll(() => seen.byCount, { timeout: 30_000 }).toBe(2_000);
    expect(await t.dlq.count()).toBe(10_000);
    // Several workers' passes together removed exactly the excess: none counted twice.
    expect(removedInLogs()).toMatchObject({ byAge: 0, byCount: 2_000 });
    const { body } = await metrics.render();
    expect(body).toContain(
      `requeue_dlq_retention_removed_total{queue="${t.name}",reason="count"} 2000`,
    );
    console.log(
      `burst 12,000 / maxCount 10,000 over 3 workers: 10,000 kept, ${seen.trims} passes, ` +
        `last trim ${Math.round(seen.trimmedAt - seen.lastDeathAt)} ms after the last death`,
    );
  }, 300_000);

  it('maxAgeMs is applied with no job dying at all (was: only a death ran the retention)', async () => {
    const t = setup('age-idle');
    const { logger, removedInLogs } = capturedLogger();
    const clock = new ManualClock(t0);
    await seedMany(t.name, 5, t0 - 1_000);
    const worker = createWorker(t.name, async () => undefined, {
      connection: redisUrl(),
      logger,
      clock,
      retention: { maxAgeMs: 60_000, intervalMs: 20 },
    });
    onCleanup(() => worker.close({ timeoutMs: 5_000 }));
    const trimmed: { byAge: number; byCount: number }[] = [];
    worker.on('dlq:trimmed', (e) => void trimmed.push({ byAge: e.byAge, byCount: e.byCount }));
    await worker.waitUntilReady();
    expect(await t.dlq.count()).toBe(5);
    // A minute later, by the worker's clock, the five are past maxAgeMs: its timer drops them.
    clock.advance(60_000);
    await expect.poll(() => trimmed.reduce((n, e) => n + e.byAge, 0)).toBe(5);
    expect(trimmed.reduce((n, e) => n + e.byCount, 0)).toBe(0);
    expect(await t.dlq.count()).toBe(0);
    expect(removedInLogs()).toMatchObject({ byAge: 5, byCount: 0 });
  });

  it('passes of four DLQ handles at once remove exactly the excess, each record once', async () => {
    const t = setup('concurrent');
    await seedMany(t.name, 5_000, t0);
    const { logger, removedInLogs } = capturedLogger();
    const handles = Array.from(
      { length: 4 },
      () =>
        new DeadLetterQueue(t.name, {
          connection: redisUrl(),
          logger,
          clock: new ManualClock(t0 + 10_000),
          retention: { maxCount: 1_000 },
        }),
    );
    onCleanup(() => Promise.all(handles.map((h) => h.close())).then(() => undefined));
    const results = await Promise.all(handles.map((h) => h.trim()));
    const sum = results.reduce((n, r) => n + r.byAge + r.byCount, 0);
    expect(sum).toBe(4_000);
    expect(await t.dlq.count()).toBe(1_000);
    // The newest 1,000 are the ones kept.
    expect((await admin.zrange(requeueKeys(t.name).dead, 0, 0))[0]).toBe('d0004000');
    expect(removedInLogs().byCount).toBe(4_000);
    expect(await admin.exists(requeueKeys(t.name).deadTrimLock)).toBe(0);
  });

  it('one batch removes at most 1,000 records and holds the fleet’s lock for its pass; another pass touches nothing meanwhile', async () => {
    const t = setup('batch-lock');
    await seedMany(t.name, 2_500, t0);
    const keys = requeueKeys(t.name);
    const batch = (token: string) =>
      runScript<[number, number]>(
        admin,
        'trimDeadBatch',
        [keys.dead, keys.deadTrimLock],
        [keys.deadRecordPrefix, t0 - 1, 100, trimBatch, token, trimLockMs],
      );
    expect(await batch('pass-a')).toEqual([0, 1_000]);
    expect(await admin.get(keys.deadTrimLock)).toBe('pass-a');
    const ttl = await admin.pttl(keys.deadTrimLock);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(trimLockMs);
    // Another pass is refused and removes nothing while pass-a holds the lock.
    const [refused] = await batch('pass-b');
    expect(refused).toBe(-1);
    expect(await t.dlq.count()).toBe(1_500);
    const other = new DeadLetterQueue(t.name, {
      connection: redisUrl(),
      clock: new ManualClock(t0),
      retention: { maxCount: 100 },
    });
    onCleanup(() => other.close());
    expect(await other.retentionPass()).toMatchObject({ kind: 'busy' });
    expect(await t.dlq.count()).toBe(1_500);
    // pass-a goes on: a full batch, then a short one that ends the pass and frees the lock.
    expect(await batch('pass-a')).toEqual([0, 1_000]);
    expect(await batch('pass-a')).toEqual([0, 400]);
    expect(await admin.exists(keys.deadTrimLock)).toBe(0);
    expect(await t.dlq.count()).toBe(100);
    // The dead records' hashes went with their index entries.
    expect(await admin.exists(`${keys.deadRecordPrefix}d0000000`)).toBe(0);
    expect(await admin.exists(`${keys.deadRecordPrefix}d0002499`)).toBe(1);
  });

  it('a pass stopped by a closing worker ends after its current batch and frees the fleet’s lock', async () => {
    const t = setup('abort');
    await seedMany(t.name, 3_100, t0);
    const dlq = new DeadLetterQueue(t.name, {
      connection: redisUrl(),
      clock: new ManualClock(t0),
      logger: createLogger({ level: 'silent' }),
      retention: { maxCount: 100 },
    });
    onCleanup(() => dlq.close());
    const stop = new AbortController();
    const pass = dlq.retentionPass(stop.signal);
    stop.abort();
    expect(await pass).toEqual({ kind: 'done', removed: { byAge: 0, byCount: trimBatch } });
    expect(await dlq.count()).toBe(3_100 - trimBatch);
    expect(await admin.exists(requeueKeys(t.name).deadTrimLock)).toBe(0);
    // The next pass (any worker's) does the rest at once.
    expect(await dlq.trim()).toEqual({ byAge: 0, byCount: 2_000 });
  });

  it('a worker’s retention timer runs passes on time by its clock and stops on close', async () => {
    const t = setup('keeper');
    await seedMany(t.name, 30, t0);
    const clock = new ManualClock(t0 + 1_000);
    const timers: { fn: () => void; at: number; cancelled: boolean }[] = [];
    const setTimer: SetTimer = (fn, ms) => {
      const timer = { fn, at: clock.now() + ms, cancelled: false };
      timers.push(timer);
      return { cancel: () => void (timer.cancelled = true) };
    };
    const due = () => timers.filter((x) => !x.cancelled);
    /** Fires the one armed timer (at its time), and waits for the pass it starts. */
    const fire = async () => {
      const [next] = due();
      expect(due()).toHaveLength(1);
      next!.cancelled = true;
      clock.set(Math.max(clock.now(), next!.at));
      next!.fn();
      await expect.poll(() => due().length).toBe(1);
    };
    const trims: number[] = [];
    const dlq = new DeadLetterQueue(t.name, {
      connection: redisUrl(),
      clock,
      logger: createLogger({ level: 'silent' }),
      retention: { maxCount: 20, maxAgeMs: 10_000 },
      onTrim: (r) => void trims.push(r.byAge + r.byCount),
    });
    onCleanup(() => dlq.close());
    const keeper = new RetentionKeeper({
      pass: (signal) => dlq.retentionPass(signal),
      clock,
      logger: createLogger({ level: 'silent' }),
      intervalMs: 5_000,
      setTimer,
    });
    keeper.start();
    expect(due().map((x) => x.at)).toEqual([t0 + 1_000]);
    await fire();
    expect(trims).toEqual([10]);
    // Then every intervalMs, deaths or not.
    expect(due()[0]!.at).toBe(t0 + 6_000);
    // A death brings the next pass forward to a second after the last one began.
    clock.advance(200);
    keeper.noteDeath();
    expect(due().map((x) => x.at)).toEqual([t0 + 2_000]);
    await fire();
    expect(trims).toEqual([10]);
    // No deaths: the periodic pass applies the age limit (all 20 are older than 10 s by now).
    clock.set(t0 + 20_000);
    await fire();
    expect(trims).toEqual([10, 20]);
    expect(await dlq.count()).toBe(0);
    await keeper.stop();
    expect(due()).toEqual([]);
    keeper.noteDeath();
    expect(due()).toEqual([]);
    expect(keeper.pending).toBe(false);
  });
});
