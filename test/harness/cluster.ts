import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import {
  canConnect,
  startRedisServer,
  type RedisServerHandle,
} from '../../src/redis/redis-server.js';

const run = promisify(execFile);

/** A local Redis Cluster of masters (and replicas) on loopback, started by this process. */
export interface RedisClusterHandle {
  /** A seed node's URL, as `REDIS_URL` names it with `REDIS_CLUSTER=1`. */
  readonly url: string;
  readonly ports: readonly number[];
  readonly servers: readonly RedisServerHandle[];
  /** Stops every node and removes their directories. */
  stop(): Promise<void>;
}

export interface RedisClusterOptions {
  /** Masters. @defaultValue `3` */
  masters?: number;
  /** Replicas per master. @defaultValue `0` */
  replicas?: number;
  /**
   * First port to try; nodes take free ports from here upwards (each also
   * needs its cluster bus port, the port + 10000, free).
   * @defaultValue `REQUEUE_TEST_CLUSTER_PORT`, else `7100`
   */
  basePort?: number;
  /** How many ports from `basePort` may be tried. @defaultValue `100` */
  portRange?: number;
  /** Cluster node timeout: how long a master may be silent before its replica takes over. @defaultValue `1000` */
  nodeTimeoutMs?: number;
}

async function portFree(port: number): Promise<boolean> {
  return (
    !(await canConnect('127.0.0.1', port, 100)) &&
    !(await canConnect('127.0.0.1', port + 10_000, 100))
  );
}

/**
 * Starts `masters × (1 + replicas)` `redis-server --cluster-enabled yes` on
 * loopback, joins them with `redis-cli --cluster create … --cluster-replicas
 * N --cluster-yes`, and waits until every node says `cluster_state:ok`.
 */
export async function startRedisCluster(
  options: RedisClusterOptions = {},
): Promise<RedisClusterHandle> {
  const masters = options.masters ?? 3;
  const replicas = options.replicas ?? 0;
  const count = masters * (1 + replicas);
  const basePort = options.basePort ?? Number(process.env.REQUEUE_TEST_CLUSTER_PORT ?? 7100);
  const portRange = options.portRange ?? 100;
  const root = await mkdtemp(join(tmpdir(), 'requeue-cluster-'));
  const servers: RedisServerHandle[] = [];
  const stop = async (): Promise<void> => {
    await Promise.all(servers.map((s) => s.stop()));
    await rm(root, { recursive: true, force: true });
  };
  try {
    for (let port = basePort; servers.length < count && port < basePort + portRange; port += 1) {
      if (!(await portFree(port))) continue;
      try {
        servers.push(
          await startRedisServer({
            port,
            dir: await mkdtemp(join(root, `${port}-`)),
            appendonly: false,
            args: [
              '--cluster-enabled',
              'yes',
              '--cluster-config-file',
              'nodes.conf',
              '--cluster-node-timeout',
              String(options.nodeTimeoutMs ?? 1000),
            ],
          }),
        );
      } catch {
        // Taken between the check and the start: try the next port.
      }
    }
    if (servers.length < count)
      throw new Error(`no ${count} free ports from ${basePort} to ${basePort + portRange - 1}`);
    await run(
      'redis-cli',
      [
        '--cluster',
        'create',
        ...servers.map((s) => `127.0.0.1:${s.port}`),
        '--cluster-replicas',
        String(replicas),
        '--cluster-yes',
      ],
      { timeout: 30_000 },
    );
    await waitClusterOk(servers.map((s) => s.port));
    if (replicas > 0) await waitReplicas(servers[0]!.port, replicas);
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    url: `redis://127.0.0.1:${servers[0]!.port}`,
    ports: servers.map((s) => s.port),
    servers,
    stop,
  };
}

/** Waits until every node reports `cluster_state:ok` and knows every slot. */
export async function waitClusterOk(ports: readonly number[], timeoutMs = 30_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (const port of ports) {
    const node = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 1 });
    node.on('error', () => undefined);
    try {
      for (;;) {
        const info = await node.cluster('INFO').catch(() => '');
        if (/cluster_state:ok/.test(info) && /cluster_slots_ok:16384/.test(info)) break;
        if (performance.now() > deadline)
          throw new Error(`cluster node ${port} not ok within ${timeoutMs} ms:\n${info}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      node.disconnect();
    }
  }
}

/** Waits until every slot range lists `replicas` replicas with their master. */
async function waitReplicas(port: number, replicas: number, timeoutMs = 30_000): Promise<void> {
  const node = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 1 });
  node.on('error', () => undefined);
  const deadline = performance.now() + timeoutMs;
  try {
    for (;;) {
      const ranges = (await node.cluster('SLOTS').catch(() => [])) as unknown[][];
      if (ranges.length > 0 && ranges.every((range) => range.length >= 3 + replicas)) return;
      if (performance.now() > deadline)
        throw new Error(`cluster replicas not attached within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    node.disconnect();
  }
}
