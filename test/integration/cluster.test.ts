import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis, type Cluster } from 'ioredis';
import { PermanentError } from '../../src/errors/permanent-error.js';
import { createCluster } from '../../src/redis/connection.js';
import { bullPrefix, requeueKeys } from '../../src/redis/keys.js';
import { DeadLetterQueue } from '../../src/scheduler/dlq/dead-letter-queue.js';
import { createQueue, type QueueCounts } from '../../src/scheduler/queue.js';
import { createWorker, type RequeueWorker } from '../../src/scheduler/requeue-worker.js';
import { runTs, spawnTs, type CommandResult } from '../harness/child.js';
import { startRedisCluster, type RedisClusterHandle } from '../harness/cluster.js';
import { onCleanup } from '../harness/cleanup.js';
import { cleanQueue, onCluster, redisUrl } from '../harness/redis.js';
import { createServer } from 'node:http';
import { createLogger } from '../../src/config/logger.js';
import { parseServiceConfig } from '../../workers/service/config.js';
import { startService } from '../../workers/service/service.js';

/**
 * Redis Cluster with unchanged user code: plain queue names, a Cluster
 * connection, the CLI given REDIS_CLUSTER=1 or --cluster. On a cluster run
 * (REQUEUE_TEST_CLUSTER=1) it uses the run's cluster; otherwise it starts a
 * local 3-master cluster of its own (ports from REQUEUE_TEST_CLUSTER_PORT,
 * else 7100).
 */

let own: RedisClusterHandle | undefined;
let seed: string;
let admin: Cluster;

beforeAll(async () => {
  if (onCluster()) seed = redisUrl();
  else {
    own = await startRedisCluster();
    seed = own.url;
  }
  admin = createCluster(seed);
}, 60_000);

afterAll(async () => {
  admin?.disconnect();
  await own?.stop();
});

/** The master (`host:port`) that serves `key`'s slot. */
async function masterOf(key: string): Promise<string> {
  const slot = (await admin.cluster('KEYSLOT', key)) as number;
  const ranges = (await admin.cluster('SLOTS')) as unknown as [number, number, [string, number]][];
  const range = ranges.find(([from, to]) => slot >= from && slot <= to);
  if (!range) throw new Error(`no master serves slot ${slot}`);
  return `${range[2][0]}:${range[2][1]}`;
}

/** `count` plain queue names whose keys fall on `count` different masters. */
async function namesOnDistinctMasters(count: number): Promise<Map<string, string>> {
  const byMaster = new Map<string, string>();
  for (let i = 0; i < 500 && byMaster.size < count; i += 1) {
    const name = `cq-${randomUUID().slice(0, 8)}`;
    const master = await masterOf(requeueKeys(name).dead);
    if (!byMaster.has(master)) byMaster.set(master, name);
  }
  const names = new Map([...byMaster].map(([master, name]) => [name, master]));
  for (const name of names.keys()) onCleanup(() => cleanQueue(admin, name));
  return names;
}

/** Every key of the cluster containing `text`, with the master it was found on. */
async function keysContaining(text: string): Promise<{ key: string; node: string }[]> {
  const found: { key: string; node: string }[] = [];
  for (const node of admin.nodes('master')) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', `*${text}*`, 'COUNT', 1000);
      cursor = next;
      for (const key of keys)
        found.push({ key, node: `${node.options.host}:${node.options.port}` });
    } while (cursor !== '0');
  }
  return found;
}

/** Waits until `n` events of `names` have been emitted by `worker`. */
function events(worker: RequeueWorker, names: string[], n: number): Promise<void> {
  return new Promise((resolve) => {
    let seen = 0;
    for (const name of names)
      worker.on(name as 'job:completed', () => {
        if (++seen === n) resolve();
      });
  });
}

describe('on a local 3-master Redis Cluster', () => {
  it('three plain-named queues on three masters retry, dead-letter and replay, each queue in one slot', async () => {
    const names = await namesOnDistinctMasters(3);
    expect(new Set(names.values()).size).toBe(3);

    for (const name of names.keys()) {
      const queue = createQueue(name, { connection: admin });
      onCleanup(() => queue.close());
      const calls: string[] = [];
      const worker = createWorker(
        name,
        async (job) => {
          calls.push(`${job.name}:${job.attempt}`);
          if (job.name === 'flaky' && job.attempt === 1)
            throw Object.assign(new Error('busy'), { status: 503 });
          if (job.name === 'bad' && job.replays === 0) throw new PermanentError('refused');
          return 'ok';
        },
        {
          connection: admin,
          concurrency: 4,
          policy: { strategy: 'fixed', baseMs: 20, capMs: 20, maxAttempts: 3 },
          breaker: { minimumRequests: 100 },
          breakerKey: (job) => job.name,
          budget: { kind: 'token-bucket' },
        },
      );
      onCleanup(() => worker.close({ timeoutMs: 5_000 }));
      const settled = events(worker, ['job:completed', 'job:dead-lettered'], 2);
      await queue.add('flaky', {});
      await queue.add('bad', {});
      await settled;
      const dlq = new DeadLetterQueue(name, { connection: admin });
      expect(await dlq.count()).toBe(1);
      const replayed = events(worker, ['job:completed'], 1);
      expect((await dlq.replay({})).done).toBe(1);
      await replayed;
      expect(calls.sort()).toEqual(['bad:1', 'bad:1', 'flaky:1', 'flaky:2']);
      const counts: QueueCounts = await queue.counts();
      expect(counts).toEqual({
        waiting: 0,
        active: 0,
        delayed: 0,
        completed: 2,
        failed: 0,
        dead: 0,
      });

      // BullMQ's keys (with the tag requeue put in their prefix) and requeue's
      // own (breaker, its window, budget): one slot, on the master chosen above.
      const keys = await keysContaining(name);
      const kinds = keys.map(({ key }) => key);
      expect(kinds).toContain(`${bullPrefix(name, true)}:${name}:meta`);
      expect(kinds).toContain(requeueKeys(name).budget);
      expect(kinds).toContain(requeueKeys(name).breakerWindow('flaky'));
      const slots = new Set(
        await Promise.all(keys.map(({ key }) => admin.cluster('KEYSLOT', key) as Promise<number>)),
      );
      expect(slots.size, JSON.stringify(kinds)).toBe(1);
      expect(new Set(keys.map((k) => k.node))).toEqual(new Set([names.get(name)]));
    }
  });

  it('a queue name with its own hash tag keeps it: BullMQ and requeue keys in the tag’s slot', async () => {
    const tag = `t${randomUUID().slice(0, 6)}`;
    const name = `jobs-{${tag}}`;
    onCleanup(() => cleanQueue(admin, name));
    const queue = createQueue(name, { connection: admin });
    onCleanup(() => queue.close());
    const worker = createWorker(
      name,
      async () => {
        throw new PermanentError('no');
      },
      { connection: admin },
    );
    onCleanup(() => worker.close({ timeoutMs: 5_000 }));
    const dead = events(worker, ['job:dead-lettered'], 1);
    await queue.add('x', {});
    await dead;
    const keys = (await keysContaining(tag)).map(({ key }) => key);
    expect(keys).toContain(`bull:${name}:meta`);
    expect(keys).toContain(`requeue:${name}:dead`);
    const slots = new Set(
      await Promise.all(keys.map((key) => admin.cluster('KEYSLOT', key) as Promise<number>)),
    );
    expect(slots).toEqual(new Set([await admin.cluster('KEYSLOT', `{${tag}}`)]));
  });
});

describe('the CLI on a cluster', () => {
  /** Runs `requeue ...args` with REDIS_URL naming a seed node. */
  function requeue(env: Record<string, string>, ...args: string[]): Promise<CommandResult> {
    return runTs('src/cli/main.ts', args, { REDIS_URL: seed, ...env });
  }
  async function json<T>(env: Record<string, string>, ...args: string[]): Promise<T> {
    const result = await requeue(env, ...args, '--json');
    expect(result, `requeue ${args.join(' ')}: ${result.stderr}`).toMatchObject({ code: 0 });
    return JSON.parse(result.stdout) as T;
  }

  it('REDIS_CLUSTER=1 (and --cluster) enqueue, worker, stats, dlq and breaker work on queues spread over the masters', async () => {
    const names = [...(await namesOnDistinctMasters(3)).keys()];
    // The three queues at once, each with its own CLI worker; the first
    // through --cluster alone (REDIS_CLUSTER explicitly off).
    await Promise.all(
      names.map(async (name, i) => {
        const env = { REDIS_CLUSTER: i === 0 ? '' : '1' };
        const flag = i === 0 ? ['--cluster'] : [];
        for (const data of [{ fail: 'transient', times: 1 }, { fail: 'permanent' }])
          await json(env, 'enqueue', name, '--data', JSON.stringify(data), ...flag);
        const worker = spawnTs(
          'src/cli/main.ts',
          [
            'worker',
            name,
            '--handler',
            'examples/flaky-handler.mjs',
            '--policy',
            JSON.stringify({ strategy: 'fixed', baseMs: 50, capMs: 50, maxAttempts: 3 }),
            ...flag,
          ],
          { REDIS_URL: seed, ...env },
        );
        onCleanup(() => worker.kill('SIGKILL'));
        // Waits through the library (a CLI call is a process of its own), then asks the CLI.
        const queue = createQueue(name, { connection: admin });
        onCleanup(() => queue.close());
        const deadline = Date.now() + 60_000;
        for (;;) {
          const c = await queue.counts();
          if (c.completed + c.dead >= 2 && c.active + c.delayed === 0) break;
          if (Date.now() > deadline) throw new Error(`stuck at ${JSON.stringify(c)}`);
          await new Promise((r) => setTimeout(r, 100));
        }
        const counts = await json<QueueCounts>(env, 'stats', name, ...flag);
        expect(counts).toEqual({
          waiting: 0,
          active: 0,
          delayed: 0,
          completed: 1,
          failed: 0,
          dead: 1,
        });
        const listed = await json<{ name: string }[]>(env, 'dlq', 'list', name, ...flag);
        expect(listed).toHaveLength(1);
        const status = await json<{ budget: unknown }>(env, 'breaker', 'status', name, ...flag);
        expect(status).toHaveProperty('budget');
      }),
    );
  }, 120_000);
});

describe('a cluster node given as a single Redis', () => {
  it('`requeue worker` and `requeue stats` without --cluster exit with one line naming REDIS_CLUSTER', async () => {
    const seedPort = Number(new URL(seed).port);
    // A queue whose slot another master serves: a single connection to the seed meets MOVED.
    let name = '';
    for (const candidate of (await namesOnDistinctMasters(3)).entries())
      if (!candidate[1].endsWith(`:${seedPort}`)) name = candidate[0];
    const env = { REDIS_URL: seed, REDIS_CLUSTER: '' };
    const worker = await runTs(
      'src/cli/main.ts',
      ['worker', name, '--handler', 'examples/flaky-handler.mjs'],
      env,
    );
    expect(worker.code, worker.stderr).toBe(2);
    expect(worker.stderr.trimEnd().split('\n')).toEqual([
      `requeue: REDIS_URL: ${seed} is a Redis Cluster node; set REDIS_CLUSTER=1 (CLI: --cluster)`,
    ]);
    const stats = await runTs('src/cli/main.ts', ['stats', name], env);
    expect(stats.code).not.toBe(0);
    // MOVED, or CROSSSLOT to the known-queue check's multi-key EXISTS: one line either way.
    expect(stats.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(stats.stderr.trimEnd()).toMatch(
      /^requeue: Redis answered (MOVED|CROSSSLOT): it is a Redis Cluster; add --cluster or set REDIS_CLUSTER=1$/,
    );
  }, 60_000);
});

describe('a single connection to a cluster node in the library', () => {
  it('a worker refuses it at start with one error, instead of a hot loop of CROSSSLOT errors (22,762 in 5 s before)', async () => {
    const name = [...(await namesOnDistinctMasters(1)).keys()][0]!;
    const single = new Redis(seed, { maxRetriesPerRequest: null });
    onCleanup(() => single.disconnect());
    const worker = createWorker(name, async () => undefined, {
      connection: single,
      logger: createLogger({ level: 'silent' }),
    });
    onCleanup(() => worker.close({ timeoutMs: 2_000 }));
    let errors = 0;
    worker.bull.on('error', () => (errors += 1));
    await expect(worker.waitUntilReady()).rejects.toThrow(
      /^worker\.connection: a single connection to a Redis Cluster node; pass an ioredis Cluster/,
    );
    await new Promise((r) => setTimeout(r, 500));
    expect(errors).toBe(0);
  });
});

describe('the service on a cluster', () => {
  it('with REDIS_CLUSTER=1 it takes a job and a webhook over HTTP, runs one and delivers the other', async () => {
    const [jobs, hooks] = [...(await namesOnDistinctMasters(2)).keys()];
    const delivered: string[] = [];
    const receiver = createServer((req, res) => {
      delivered.push(String(req.headers['webhook-id']));
      req.resume();
      res.writeHead(204).end();
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    onCleanup(() => new Promise<void>((resolve) => receiver.close(() => resolve())));
    const port = (receiver.address() as { port: number }).port;
    const config = parseServiceConfig(
      {
        port: 0,
        redisUrl: seed,
        webhooks: { queue: hooks!, allowPrivate: true },
        queues: [{ name: jobs!, handler: 'examples/flaky-handler.mjs', concurrency: 2 }],
      },
      {},
    );
    const before = process.env.REDIS_CLUSTER;
    process.env.REDIS_CLUSTER = '1';
    const service = await startService(config, createLogger({ level: 'silent' })).finally(() => {
      if (before === undefined) delete process.env.REDIS_CLUSTER;
      else process.env.REDIS_CLUSTER = before;
    });
    onCleanup(() => service.stop());
    const post = (path: string, body: unknown) =>
      fetch(`${service.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    expect((await fetch(`${service.url}/readyz`)).status).toBe(200);
    expect(
      (await post(`/v1/jobs/${jobs}`, { name: 'j', data: { fail: 'transient' } })).status,
    ).toBe(202);
    expect(
      (
        await post('/v1/webhooks', {
          endpoint: { id: 'ep', url: `http://127.0.0.1:${port}/hook` },
          event: { id: 'evt-1', type: 't', payload: {} },
        })
      ).status,
    ).toBe(202);
    const queue = createQueue(jobs!, { connection: admin });
    onCleanup(() => queue.close());
    const deadline = Date.now() + 20_000;
    while (delivered.length === 0 || (await queue.counts()).completed === 0) {
      if (Date.now() > deadline)
        throw new Error(`not done: ${JSON.stringify(await queue.counts())}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(delivered).toEqual(['evt-1']);
    expect((await fetch(`${service.url}/metrics`)).status).toBe(200);
  }, 60_000);
});
