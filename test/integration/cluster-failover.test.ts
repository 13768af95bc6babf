import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis, type Cluster } from 'ioredis';
import { createCluster } from '../../src/redis/connection.js';
import { requeueKeys } from '../../src/redis/keys.js';
import { createQueue } from '../../src/scheduler/queue.js';
import { createWorker } from '../../src/scheduler/requeue-worker.js';
import { startRedisCluster, waitClusterOk, type RedisClusterHandle } from '../harness/cluster.js';
import { onCleanup } from '../harness/cleanup.js';
import { openMonitor } from '../harness/monitor.js';
import { uniqueQueueName } from '../harness/redis.js';

/**
 * A master of a local cluster with one replica per master is SIGKILLed while
 * a worker runs its queue; the replica takes over, and the worker carries on
 * without a restart. Redis replicates asynchronously, so the test waits until
 * the replica has every write made before the kill's moment (its offset), as a
 * replica would with a little luck: what it checks is requeue's side — no job
 * lost, none in two places, the failed set empty — not Redis's replication.
 */

let cluster: RedisClusterHandle;
let admin: Cluster;

/** A cluster of its own for the tests of one `describe` (each kills a node of it). */
function clusterPerDescribe(options: { replicas: number }): void {
  beforeAll(async () => {
    cluster = await startRedisCluster({
      masters: 3,
      replicas: options.replicas,
      nodeTimeoutMs: 1000,
    });
    admin = createCluster(cluster.url);
  }, 90_000);
  afterAll(async () => {
    admin?.disconnect();
    await cluster?.stop();
  });
}

/** `host:port` of the master serving `key`, and of its replicas. */
async function nodesOf(
  key: string,
  via: Cluster = admin,
): Promise<{ master: number; replicas: number[] }> {
  const slot = (await via.cluster('KEYSLOT', key)) as number;
  const ranges = (await via.cluster('SLOTS')) as unknown as [
    number,
    number,
    ...[string, number][],
  ][];
  const range = ranges.find(([from, to]) => slot >= from && slot <= to)!;
  const [, , master, ...replicas] = range;
  return { master: master![1], replicas: replicas.map((r) => r[1]) };
}

async function info(
  port: number,
  field: string,
  section = 'replication',
): Promise<string | undefined> {
  const node = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 1 });
  node.on('error', () => undefined);
  try {
    await node.connect();
    const text = section === 'cluster' ? await node.cluster('INFO') : await node.info(section);
    return new RegExp(`^${field}:(.*)$`, 'm').exec(text)?.[1]?.trim();
  } finally {
    node.disconnect();
  }
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('a Redis Cluster failover', () => {
  clusterPerDescribe({ replicas: 1 });

  it('a master killed mid-run: its replica takes over, the worker carries on, no job is lost', async () => {
    const name = uniqueQueueName('failover');
    // A replica shows in CLUSTER SLOTS once it has joined its master (later on a busy machine).
    await until(
      'every master to list its replica',
      async () => (await nodesOf(requeueKeys(name).dead)).replicas.length === 1,
      30_000,
    );
    const { master, replicas } = await nodesOf(requeueKeys(name).dead);
    expect(replicas).toHaveLength(1);
    const queue = createQueue(name, { connection: admin });
    onCleanup(() => queue.close());
    const runs = new Map<string, number>();
    const worker = createWorker(
      name,
      async (job) => {
        runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
        await new Promise((r) => setTimeout(r, 5));
        // Every third job fails once: retries are in the delayed set at the kill.
        if (Number((job.data as { n: number }).n) % 3 === 0 && job.attempt === 1)
          throw Object.assign(new Error('busy'), { status: 503 });
      },
      {
        connection: admin,
        concurrency: 8,
        lockDurationMs: 2_000,
        stalledIntervalMs: 1_000,
        policy: { strategy: 'fixed', baseMs: 300, capMs: 300, maxAttempts: 10 },
      },
    );
    onCleanup(() => worker.close({ timeoutMs: 5_000 }));

    const ids: string[] = [];
    for (let n = 1; n <= 150; n += 1) ids.push((await queue.add('job', { n })).id);
    await until('some jobs to finish', async () => runs.size >= 30, 20_000);

    // The moment of the kill: the replica has every write made so far.
    const offset = Number(await info(master, 'master_repl_offset'));
    await until(
      'the replica to catch up',
      async () => Number(await info(replicas[0]!, 'slave_repl_offset')) >= offset,
      10_000,
    );
    const killedAt = Date.now();
    await cluster.servers.find((s) => s.port === master)!.kill();
    await until(
      'the replica to be promoted',
      async () => (await info(replicas[0]!, 'role')) === 'master',
      20_000,
    );
    const promotedMs = Date.now() - killedAt;
    await waitClusterOk(cluster.ports.filter((p) => p !== master));

    // Adds after the failover go to the new master.
    for (let n = 151; n <= 200; n += 1) ids.push((await queue.add('job', { n })).id);
    await until(
      'every job to complete',
      async () => {
        const c = await queue.counts();
        return c.completed === ids.length;
      },
      90_000,
    ).catch(async (err: Error) => {
      // Where the jobs are, to tell a stuck worker from a lost job next time.
      const counts = JSON.stringify(await queue.counts().catch(() => 'unreadable'));
      throw new Error(`${err.message} (promoted in ${promotedMs} ms; counts ${counts})`);
    });
    const counts = await queue.counts();
    expect(counts).toEqual({
      waiting: 0,
      active: 0,
      delayed: 0,
      completed: 200,
      failed: 0,
      dead: 0,
    });
    // Every job ran (at least once: a write lost in the kill can re-run one).
    expect(ids.filter((id) => !runs.has(id))).toEqual([]);
    // Runs beyond the designed ones (a second for every third job): re-runs the failover caused.
    const extra = ids.reduce(
      (sum, id, i) => sum + (runs.get(id) ?? 0) - ((i + 1) % 3 === 0 ? 2 : 1),
      0,
    );
    console.log(
      `[failover] master :${master} killed, replica :${replicas[0]} promoted in ${promotedMs} ms; ` +
        `200 jobs completed, ${extra} extra run(s)`,
    );
  }, 180_000);
});

/** `promise`, or a rejection naming `what` after `ms`. */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: not settled within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

describe('the seed node is the master that dies', () => {
  clusterPerDescribe({ replicas: 1 });

  it('regression: a worker idle in its blocking wait on the seed master, killed just before the wait timed out, fetched nothing again (its blocking connection reconnected to the dead seed only, or its connect() met the cluster down and never settled)', async () => {
    const seed = cluster.ports[0]!;
    // A queue whose slot the seed serves, once the seed lists its replica.
    let name = '';
    for (let i = 0; ; i += 1) {
      name = uniqueQueueName(`seed${i}`);
      const nodes = await nodesOf(requeueKeys(name).dead);
      if (nodes.master === seed && nodes.replicas.length === 1) break;
      if (i > 2_000) throw new Error(`no queue name on the seed :${seed} with its replica`);
    }
    const { replicas } = await nodesOf(requeueKeys(name).dead);
    const queue = createQueue(name, { connection: admin });
    onCleanup(() => queue.close());
    let completed = 0;
    const worker = createWorker(
      name,
      async () => {
        completed += 1;
      },
      { connection: admin, concurrency: 4, lockDurationMs: 2_000, stalledIntervalMs: 1_000 },
    );
    onCleanup(() => worker.close({ timeoutMs: 5_000 }));
    // A connection opened from the seed URL, to connect again from scratch after the kill.
    const fresh = createCluster(cluster.url);
    onCleanup(() => fresh.disconnect());
    await fresh.cluster('INFO');
    for (let n = 0; n < 3; n += 1) await queue.add('job', { n });
    await until('the first jobs to complete', async () => completed === 3, 20_000);

    // The worker is idle: its blocking connection waits on the seed, BZPOPMIN
    // with a timeout. Kill the seed 0.5 s before that timeout: BullMQ's
    // watchdog (the timeout + 1 s) then resets the blocking connection while
    // the seed is dead and its replica not yet promoted.
    const marker = `${name}:marker`;
    const waitStarted = new Promise<{ at: number; timeoutMs: number }>((resolve) => {
      void openMonitor(new Redis(seed, '127.0.0.1', { lazyConnect: true }), (args) => {
        if (args[0]?.toLowerCase() === 'bzpopmin' && args[1]?.endsWith(marker))
          resolve({ at: Date.now(), timeoutMs: Number(args[2]) * 1000 });
      }).then((socket) => onCleanup(() => socket.destroy()));
    });
    const { at, timeoutMs } = await within(waitStarted, 15_000, 'a blocking wait on the seed');
    await new Promise((r) => setTimeout(r, Math.max(0, at + timeoutMs - 500 - Date.now())));
    await cluster.servers.find((s) => s.port === seed)!.kill();
    await until(
      'the replica to be promoted',
      async () => (await info(replicas[0]!, 'role')) === 'master',
      20_000,
    );
    await waitClusterOk(cluster.ports.filter((p) => p !== seed));

    // Waiting jobs, and delayed ones that only a fetch promotes.
    for (let n = 0; n < 20; n += 1)
      await queue.add('job', { n }, n % 4 === 0 ? { delayMs: 500 } : {});
    await until('every job to complete', async () => completed === 23, 30_000).catch(
      async (err: Error) => {
        throw new Error(`${err.message} (counts ${JSON.stringify(await queue.counts())})`);
      },
    );
    expect(await queue.counts()).toMatchObject({ waiting: 0, delayed: 0, completed: 23 });

    // A connection from scratch (a duplicate, as BullMQ's blocking one) goes
    // through the nodes the original learned of, not the dead seed only.
    const again = fresh.duplicate();
    onCleanup(() => again.disconnect());
    await within(
      new Promise((resolve) => again.once('ready', resolve)),
      15_000,
      'a duplicate connecting with the seed dead',
    );
    expect(await again.cluster('INFO')).toMatch(/cluster_state:ok/);
  }, 120_000);
});

describe('a connect() that meets the cluster down', () => {
  clusterPerDescribe({ replicas: 0 });

  it('regression: a connect() whose ready check met cluster_state:fail never settled, even once the cluster was back (ioredis drops that promise)', async () => {
    const [seed, other] = [cluster.ports[0]!, cluster.ports[1]!];
    const dead = cluster.servers.find((s) => s.port === other)!;
    await dead.kill();
    // Without a replica its slots stay unserved: every node says so.
    await until(
      'the cluster to be down',
      async () => (await info(seed, 'cluster_state', 'cluster')) === 'fail',
      20_000,
    );
    const late = createCluster(cluster.url, {}, { lazyConnect: true });
    onCleanup(() => late.disconnect());
    let settled = false;
    const reconnecting = new Promise((resolve) => late.once('reconnecting', resolve));
    const connecting = late.connect().finally(() => (settled = true));
    // Its ready check fails and ioredis reconnects by itself, again and again.
    await within(reconnecting, 10_000, 'a failed ready check');
    expect(settled).toBe(false);
    await dead.restart();
    await waitClusterOk(cluster.ports);
    await within(connecting, 20_000, 'connect() once the cluster is back');
    expect(await late.cluster('INFO')).toMatch(/cluster_state:ok/);
  }, 90_000);
});
