/**
 * Issue 21, part 6: a handler's result is read once. requeue serialises it
 * (`storableResult`) and BullMQ stores that string as is; before, BullMQ
 * serialised the value again (twice), so a value that serialised once but
 * not twice failed the completion and landed in BullMQ's failed set. Real
 * Redis, real workers.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { createQueue } from '../../src/scheduler/queue.js';
import { createWorker } from '../../src/scheduler/requeue-worker.js';
import { onCleanup } from '../harness/cleanup.js';
import { cleanQueue, connect, jobKey, redisUrl, uniqueQueueName } from '../harness/redis.js';
import { WorkerEventLog } from '../harness/worker-events.js';

const logger = createLogger({ level: 'silent' });
const admin = connect();
afterAll(() => admin.disconnect());

/** A result and how often requeue and BullMQ touched it. */
interface Probe {
  value: () => unknown;
  reads: () => number;
}

/** An object whose `name` getter counts its reads and throws from read `throwFrom` on. */
function getterProbe(name: string, value: unknown, throwFrom: number): Probe {
  let reads = 0;
  return {
    value: () => {
      const result = {};
      Object.defineProperty(result, name, {
        enumerable: true,
        get() {
          reads += 1;
          if (reads >= throwFrom) throw new Error(`getter threw on read ${reads}`);
          return value;
        },
      });
      return result;
    },
    reads: () => reads,
  };
}

/** An object whose `toJSON` answers `answer(call)` and counts its calls. */
function toJsonProbe(answer: (call: number) => unknown): Probe {
  let calls = 0;
  return {
    value: () => ({
      toJSON() {
        calls += 1;
        return answer(calls);
      },
    }),
    reads: () => calls,
  };
}

/**
 * An object that is not a thenable when its handler's promise resolves, and
 * is one (whose `then` throws) from the second look on.
 */
function lateThenProbe(): Probe {
  let reads = 0;
  return {
    value: () => {
      const result = { ok: true };
      Object.defineProperty(result, 'then', {
        enumerable: false,
        get() {
          reads += 1;
          if (reads === 1) return undefined;
          return () => {
            throw new Error('then called');
          };
        },
      });
      return result;
    },
    reads: () => reads,
  };
}

/** A Proxy that counts every trap it sees (get, ownKeys, getOwnPropertyDescriptor, …). */
function proxyProbe(): Probe & { traps: () => number } {
  let traps = 0;
  const counting: ProxyHandler<object> = {};
  for (const trap of [
    'get',
    'has',
    'ownKeys',
    'getOwnPropertyDescriptor',
    'getPrototypeOf',
  ] as const)
    (counting as Record<string, unknown>)[trap] = (...args: unknown[]) => {
      traps += 1;
      return (Reflect[trap] as (...a: unknown[]) => unknown)(...args);
    };
  return {
    value: () => new Proxy({ a: 1, b: [2] }, counting),
    reads: () => traps,
    traps: () => traps,
  };
}

const note = /^\{"requeueUnstorableResult":"not storable as JSON: /;

const cases: [what: string, probe: () => Probe, stored: string | RegExp, reads: number][] = [
  [
    'a getter that works once and throws on the second read',
    () => getterProbe('total', 1, 2),
    '{"total":1}',
    1,
  ],
  ['a getter that throws on the first read', () => getterProbe('total', 1, 1), note, 1],
  [
    'a toJSON that works once and throws on the second call',
    () =>
      toJsonProbe((n) => {
        if (n > 1) throw new Error('toJSON threw');
        return { n };
      }),
    '{"n":1}',
    1,
  ],
  [
    'a toJSON that throws',
    () =>
      toJsonProbe(() => {
        throw new Error('toJSON threw');
      }),
    note,
    1,
  ],
  ['a toJSON that answers differently each call', () => toJsonProbe((n) => n), '1', 1],
  ['a BigInt inside a getter read once', () => getterProbe('big', 10n, 2), note, 1],
  // The one look at `then` is the handler's own promise resolving.
  ['an object that becomes a thenable after its first look', lateThenProbe, '{"ok":true}', 1],
];

function setup(prefix: string) {
  const name = uniqueQueueName(prefix);
  const queue = createQueue(name, { connection: redisUrl() });
  onCleanup(async () => {
    await queue.close();
    await cleanQueue(admin, name);
  });
  return { name, queue };
}

describe('a handler’s result is read once (issue 21, part 6)', () => {
  it.each(cases)(
    '%s: the job completes with what was read, and BullMQ’s failed set stays empty',
    async (_what, makeProbe, stored, reads) => {
      const t = setup('result-once');
      const probe = makeProbe();
      let returned: unknown;
      const worker = createWorker(
        t.name,
        async () => {
          returned = probe.value();
          return returned;
        },
        { connection: redisUrl(), logger },
      );
      onCleanup(() => worker.close({ timeoutMs: 5_000 }));
      const events = new WorkerEventLog(worker);
      const { id } = await t.queue.add('x', {});
      const completed = await events.waitFor('job:completed');
      expect(completed.jobId).toBe(id);
      // The event carries the handler's own value (not re-read to make it).
      expect(completed.result === returned || stored instanceof RegExp).toBe(true);
      const raw = await admin.hget(jobKey(admin, t.name, id), 'returnvalue');
      if (stored instanceof RegExp) expect(raw).toMatch(stored);
      else expect(raw).toBe(stored);
      expect(probe.reads()).toBe(reads);
      expect(await t.queue.bull.getJobCounts('completed', 'failed')).toEqual({
        completed: 1,
        failed: 0,
      });
      expect(events.all('bull:failed')).toEqual([]);
    },
  );

  it('a Proxy result is touched by one serialisation and nothing after it', async () => {
    const t = setup('result-proxy');
    // What one resolution of the handler's promise and one JSON.stringify cost.
    const reference = proxyProbe();
    JSON.stringify(await (async () => reference.value())());
    const probe = proxyProbe();
    const worker = createWorker(t.name, async () => probe.value(), {
      connection: redisUrl(),
      logger,
    });
    onCleanup(() => worker.close({ timeoutMs: 5_000 }));
    const events = new WorkerEventLog(worker);
    const { id } = await t.queue.add('x', {});
    await events.waitFor('job:completed');
    expect(await admin.hget(jobKey(admin, t.name, id), 'returnvalue')).toBe('{"a":1,"b":[2]}');
    expect(probe.traps()).toBe(reference.traps());
    expect(await t.queue.bull.getJobCounts('failed')).toEqual({ failed: 0 });
  });

  it('a getter-once result of a success after a failure completes with its history stored in the same move', async () => {
    const t = setup('result-retry');
    const probe = getterProbe('total', 7, 2);
    let calls = 0;
    const worker = createWorker(
      t.name,
      async () => {
        calls += 1;
        if (calls === 1) throw new Error('first attempt fails');
        return probe.value();
      },
      {
        connection: redisUrl(),
        logger,
        policy: { strategy: 'fixed', baseMs: 10, capMs: 10, maxAttempts: 3 },
      },
    );
    onCleanup(() => worker.close({ timeoutMs: 5_000 }));
    const events = new WorkerEventLog(worker);
    const { id } = await t.queue.add('x', {});
    await events.waitFor('job:completed');
    const [raw, rq] = await admin.hmget(jobKey(admin, t.name, id), 'returnvalue', 'rq');
    expect(raw).toBe('{"total":7}');
    expect(probe.reads()).toBe(1);
    const history = (JSON.parse(rq!) as { history: { outcome: string }[] }).history;
    expect(history.map((r) => r.outcome)).toEqual(['failed', 'succeeded']);
    expect(await t.queue.bull.getJobCounts('completed', 'failed')).toEqual({
      completed: 1,
      failed: 0,
    });
  });
});
