/**
 * A keyed add in one script call (src/scheduler/bullmq/fair-add.ts): BullMQ's
 * own addPrioritizedJob text wrapped with requeue's fair stamp. The first
 * block is the tripwire: it fails loudly if a BullMQ upgrade changes the
 * script's name, its keys' order, the text's shape the wrapper relies on,
 * or the way `Job#addJob` reaches Redis. The rest run on a private
 * redis-server, where every command counted is ours.
 */
import { createHash, randomUUID } from 'node:crypto';
import { Job, Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { createRedis } from '../../src/redis/connection.js';
import { requeueKeys } from '../../src/redis/keys.js';
import { startRedisServer, type RedisServerHandle } from '../../src/redis/redis-server.js';
import { bullKeys } from '../../src/scheduler/bullmq/bull-keys.js';
import {
  bullAddProblem,
  bullAddScript,
  composeFairAdd,
  keyedAddClient,
  type CommandRunner,
} from '../../src/scheduler/bullmq/fair-add.js';
import { installedBullmqVersion } from '../../src/scheduler/bullmq/version.js';
import { createQueue, type RequeueQueue } from '../../src/scheduler/queue.js';
import { createWorker } from '../../src/scheduler/requeue-worker.js';
import { onCleanup } from '../harness/cleanup.js';
import { openMonitor } from '../harness/monitor.js';
import { uniqueQueueName } from '../harness/redis.js';

const logger = createLogger({ level: 'silent' });
let server: RedisServerHandle;
let admin: Redis;

beforeAll(async () => {
  server = await startRedisServer({ appendonly: false });
  admin = createRedis(server.url) as Redis;
});

afterAll(async () => {
  admin?.disconnect();
  await server?.kill();
});

/** The commands BullMQ's `Job#addJob` sends for `opts`, recorded, nothing sent. */
async function recordAdd(queue: Queue, opts: Record<string, unknown>) {
  const sent: { name: string; args: unknown[] }[] = [];
  const recorder: CommandRunner = {
    runCommand(name, args) {
      sent.push({ name, args });
      return 'id-1';
    },
  };
  await new Job(queue, 'job', { a: 1 }, { jobId: 'id-1', ...opts }).addJob(recorder as never);
  return sent;
}

/** The commands clients (not scripts) sent while `action` ran, counted by name. */
async function clientCommands(action: () => Promise<unknown>): Promise<Record<string, number>> {
  const marker = `end-${randomUUID()}`;
  const calls: Record<string, number> = {};
  let ended!: () => void;
  const end = new Promise<void>((resolve) => (ended = resolve));
  const monitor = await openMonitor(admin, (args, fromScript) => {
    if (args[1] === marker) ended();
    else if (!fromScript) calls[args[0]!.toLowerCase()] = (calls[args[0]!.toLowerCase()] ?? 0) + 1;
  });
  onCleanup(() => monitor.destroy());
  await action();
  await admin.ping(marker);
  await end;
  monitor.destroy();
  return calls;
}

/**
 * Runs a worker (concurrency 1) on queue `name` until `count` jobs ran, after
 * `start` once the worker is made; returns their `n` in start order.
 */
async function runInOrder(
  name: string,
  count: number,
  start: () => Promise<unknown> = async () => undefined,
): Promise<number[]> {
  const order: number[] = [];
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  const worker = createWorker<{ n: number }>(
    name,
    async (job) => {
      order.push(job.data.n);
      if (order.length === count) done();
    },
    { connection: server.url, concurrency: 1, logger },
  );
  onCleanup(() => worker.close());
  await start();
  await finished;
  return order;
}

function setup(): { name: string; queue: RequeueQueue<{ n: number }> } {
  const name = uniqueQueueName('fair-add');
  const queue = createQueue<{ n: number }>(name, { connection: server.url });
  onCleanup(() => queue.close());
  return { name, queue };
}

describe('the BullMQ internals a keyed add relies on (tripwire)', () => {
  it('BullMQ adds a priority job with addPrioritizedJob: 9 keys (prioritized 4th, pc 9th) and 3 arguments', async () => {
    const queue = new Queue(uniqueQueueName('trip'), { connection: admin });
    onCleanup(() => queue.close());
    const [add, ...more] = await recordAdd(queue, { priority: 1 });
    expect(more).toEqual([]);
    expect(add!.name).toBe(`addPrioritizedJob:${installedBullmqVersion()}`);
    expect(add!.args).toHaveLength(12);
    expect(add!.args[3]).toBe(queue.keys.prioritized);
    expect(add!.args[8]).toBe(queue.keys.pc);
    // A delayed one takes addDelayedJob, which the stand-in lets through unstamped.
    const [delayed] = await recordAdd(queue, { priority: 1, delay: 1_000 });
    expect(delayed!.name).toBe(`addDelayedJob:${installedBullmqVersion()}`);
  });

  it('the wrapped text is the text BullMQ runs, with no #! line, ending by returning the job id', async () => {
    const script = bullAddScript();
    expect(bullAddProblem(script)).toBeUndefined();
    const text = String(script!.content);
    expect(text).toMatch(/\nreturn jobId\s*$/);
    // BullMQ's own add on a fresh server loads exactly this text.
    const queue = new Queue(uniqueQueueName('trip'), { connection: admin });
    onCleanup(() => queue.close());
    await admin.script('FLUSH');
    await queue.add('job', {}, { priority: 1 });
    const sha = createHash('sha1').update(text).digest('hex');
    expect(await admin.script('EXISTS', sha)).toEqual([1]);
  });

  it('the composed script compiles in Redis (Lua limits: locals, upvalues)', async () => {
    const sha = (await admin.script('LOAD', composeFairAdd())) as string;
    expect(sha).toMatch(/^[0-9a-f]{40}$/);
  });

  it('an add BullMQ sends by any other script is refused before anything is sent', () => {
    const sent: string[] = [];
    const bull: CommandRunner = { runCommand: (name) => sent.push(name) };
    const client = keyedAddClient(bull, 'requeue_fairAdd', {
      fair: 'f',
      job: 'j',
      id: 'i',
      dispatchKey: 'k',
      cost: 1,
    });
    expect(() => client.runCommand('addStandardJob:6.7.0', [])).toThrow(
      'requeue: BullMQ added a keyed job with addStandardJob:6.7.0, not addPrioritizedJob or addDelayedJob',
    );
    expect(sent).toEqual([]);
  });

  it('bullAddProblem names what does not fit', () => {
    expect(bullAddProblem(undefined)).toMatch(/is not the 9-key addPrioritizedJob/);
    expect(bullAddProblem({ name: 'addPrioritizedJob', keys: 10, content: '' })).toMatch(
      /is not the 9-key/,
    );
    expect(
      bullAddProblem({ name: 'addPrioritizedJob', keys: 9, content: '#!lua flags=x\nreturn 1' }),
    ).toBe('declares flags (a #! line)');
  });
});

describe('a keyed add in one script call', () => {
  it('costs one EVALSHA per add, no MULTI; addBulk stays one MULTI', async () => {
    const { name, queue } = setup();
    await queue.add('job', { n: 0 }, { dispatchKey: 'warm' }); // scripts loaded
    const adds = await clientCommands(() =>
      Promise.all(
        Array.from({ length: 20 }, (_, n) => queue.add('job', { n }, { dispatchKey: `k${n % 3}` })),
      ),
    );
    expect(adds).toEqual({ evalsha: 20 });
    const bulk = await clientCommands(() =>
      queue.addBulk(
        Array.from({ length: 5 }, (_, n) => ({
          name: 'job',
          data: { n },
          opts: { dispatchKey: 'b' },
        })),
      ),
    );
    expect(bulk).toEqual({ multi: 1, evalsha: 5, exec: 1 });
    const bull = bullKeys(name);
    expect(await admin.zcard(bull.prioritized)).toBe(26);
    // Stamped: one key's jobs take turns 0, 1, 2, …; three keys share each turn.
    const scores = await admin.zrange(bull.prioritized, 0, -1, 'WITHSCORES');
    const turns = scores.filter((_, i) => i % 2 === 1).map((s) => Number(s) - 2 ** 32);
    expect(Math.max(...turns)).toBeLessThan(8);
  });

  it('a re-add of an id leaves the job where it is: a keyed one, and an unkeyed one in the wait list', async () => {
    const { name, queue } = setup();
    const bull = bullKeys(name);
    for (let n = 0; n < 5; n++) await queue.add('job', { n }, { dispatchKey: 'a' });
    const keyed = await queue.add('job', { n: 5 }, { dispatchKey: 'a', idempotencyKey: 'x' });
    const score = await admin.zscore(bull.prioritized, keyed.id);
    expect(Number(score) - 2 ** 32).toBe(5);
    const again = await queue.add('job', { n: 6 }, { dispatchKey: 'new', idempotencyKey: 'x' });
    expect(again.id).toBe(keyed.id);
    expect(await admin.zscore(bull.prioritized, keyed.id)).toBe(score);
    expect(await admin.hget(bull.prefix + keyed.id, 'rqd')).toBe('a');
    // An unkeyed job re-added with a key stays in the wait list, unstamped.
    const plain = await queue.add('job', { n: 7 }, { idempotencyKey: 'y' });
    const keyedAgain = await queue.add('job', { n: 8 }, { dispatchKey: 'b', idempotencyKey: 'y' });
    expect(keyedAgain.id).toBe(plain.id);
    expect(await admin.lrange(bull.wait, 0, -1)).toEqual([plain.id]);
    expect(await admin.zscore(bull.prioritized, plain.id)).toBeNull();
    expect(await admin.hexists(bull.prefix + plain.id, 'rqd')).toBe(0);
    expect(await admin.zscore(requeueKeys(name).fair, 'b')).toBeNull();
    // The same within one addBulk's MULTI.
    const bulk = await queue.addBulk([
      { name: 'job', data: { n: 9 }, opts: { dispatchKey: 'c', idempotencyKey: 'z' } },
      { name: 'job', data: { n: 10 }, opts: { dispatchKey: 'd', idempotencyKey: 'z' } },
    ]);
    expect(bulk[1]!.id).toBe(bulk[0]!.id);
    expect(await admin.hget(bull.prefix + bulk[0]!.id, 'rqd')).toBe('c');
  });

  it('a paused queue takes keyed adds in their turns and runs them fairly once resumed', async () => {
    const { name, queue } = setup();
    await queue.pause();
    for (let n = 0; n < 6; n++) await queue.add('job', { n }, { dispatchKey: 'big' });
    for (let n = 6; n < 8; n++) await queue.add('job', { n }, { dispatchKey: 'small' });
    const bull = bullKeys(name);
    expect(await admin.zcard(bull.prioritized)).toBe(8);
    const order = await runInOrder(name, 8, () => queue.resume());
    // Turns 0 and 1 hold one job of each key: small's two jobs start among the first four.
    expect(order.slice(0, 4).filter((n) => n >= 6)).toHaveLength(2);
  });

  it('a delayed keyed job is added unstamped, by BullMQ alone, and runs once due', async () => {
    const { name, queue } = setup();
    const bull = bullKeys(name);
    await queue.add('job', { n: 0 }, { dispatchKey: 'warm' });
    // BullMQ's addDelayedJob loaded on the connection (this job is due long after the test).
    await queue.add('job', { n: -1 }, { dispatchKey: 'warm', delayMs: 3_600_000 });
    let job!: { id: string };
    const sent = await clientCommands(async () => {
      job = await queue.add('job', { n: 1 }, { dispatchKey: 'late', delayMs: 300 });
    });
    expect(sent).toEqual({ evalsha: 1 });
    expect(await admin.zscore(bull.delayed, job.id)).not.toBeNull();
    expect(await admin.hexists(bull.prefix + job.id, 'rqd')).toBe(0);
    expect(await admin.zscore(requeueKeys(name).fair, 'late')).toBeNull();
    const ran = await runInOrder(name, 2);
    expect(ran).toEqual([0, 1]);
  });
});
