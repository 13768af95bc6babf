import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runTs } from '../harness/child.js';
import { openMonitor } from '../harness/monitor.js';
import { startRedisCluster } from '../harness/cluster.js';
import { startRedisServer, type RedisServerHandle } from '../harness/redis.js';

/**
 * Issue 11, part 5: `requeue doctor` against private redis-servers (ports
 * 7300–7399): one set up as requeue wants it, one with `allkeys-lru` and
 * Redis's default `hz 10`. It must say what to change, exit 1 with findings,
 * and write nothing.
 */

const CLI_TIMEOUT_MS = 60_000;

let good: RedisServerHandle;
let bad: RedisServerHandle;
beforeAll(async () => {
  [good, bad] = await Promise.all([
    startRedisServer({ port: 7341, hz: 100, appendonly: true }),
    startRedisServer({
      port: 7342,
      hz: 10,
      appendonly: true,
      args: ['--maxmemory-policy', 'allkeys-lru'],
    }),
  ]);
});
afterAll(async () => {
  await Promise.all([good?.stop(), bad?.stop()]);
});

const doctor = (...args: string[]) =>
  runTs('src/cli/main.ts', ['doctor', ...args], {}, CLI_TIMEOUT_MS);

/** Every command a server received while `action` ran, by MONITOR, with its write flag. */
async function commandsDuring(
  url: string,
  action: () => Promise<unknown>,
): Promise<{ all: string[]; writes: string[] }> {
  const redis = new Redis(url);
  const seen: string[] = [];
  const marker = `end-${Math.random()}`;
  let resolveEnded: () => void = () => undefined;
  const ended = new Promise<void>((resolve) => (resolveEnded = resolve));
  // On a plain socket (the harness's): ioredis's monitor() connection fails now
  // and then with "Command queue state error" when its first line comes early.
  const monitor = await openMonitor(redis, (args) => {
    if (args[0]?.toLowerCase() === 'ping' && args[1] === marker) resolveEnded();
    else if (args[0] !== undefined) seen.push(args[0].toLowerCase());
  });
  try {
    await action();
    await redis.ping(marker);
    await ended;
    const names = [...new Set(seen)];
    const info = (await redis.command('INFO', ...names)) as [string, number, string[]][];
    const writes = info.filter((c) => c[2].includes('write')).map((c) => c[0]);
    return { all: names, writes };
  } finally {
    monitor.destroy();
    redis.disconnect();
  }
}

async function commandStats(url: string): Promise<string> {
  const redis = new Redis(url);
  try {
    return await redis.info('commandstats');
  } finally {
    redis.disconnect();
  }
}

describe('requeue doctor', () => {
  it(
    'passes a Redis set up as requeue wants it: exit 0, and writes nothing',
    { timeout: CLI_TIMEOUT_MS },
    async () => {
      let run: Awaited<ReturnType<typeof doctor>> | undefined;
      const seen = await commandsDuring(good.url, async () => {
        run = await doctor('--redis', good.url, '--queue', 'orders');
      });
      expect(run!.stderr).toBe('');
      expect(run!.code).toBe(0);
      const out = run!.stdout;
      expect(out).toMatch(/^maxmemory-policy\s+ok\s+noeviction$/m);
      expect(out).toMatch(/^appendonly\s+ok\s+yes$/m);
      expect(out).toMatch(/^appendfsync\s+ok\s+everysec/m);
      expect(out).toMatch(/^hz\s+ok\s+100; a 50 ms blocking wait ended [\d.]+ ms late/m);
      expect(out).toMatch(/^clock skew\s+ok\s+Redis (ahead|behind) by/m);
      expect(out).toMatch(/^versions\s+info\s+requeue 0\.1\.0, BullMQ 6\.7\.0$/m);
      expect(out.trimEnd().split('\n').at(-1)).toBe('no findings');
      // It did look (INFO, TIME, a blocking WAIT), and none of it writes.
      expect(seen.all).toEqual(expect.arrayContaining(['info', 'time', 'wait']));
      expect(seen.writes).toEqual([]);
      // MONITOR never shows CONFIG: the server's own counts say it was GET and never SET.
      const stats = await commandStats(good.url);
      expect(stats).toContain('cmdstat_config|get:');
      expect(stats).not.toContain('cmdstat_config|set:');
    },
  );

  it(
    'flags allkeys-lru and hz 10, says what to change, exit 1; --json says the same',
    { timeout: CLI_TIMEOUT_MS },
    async () => {
      const run = await doctor('--redis', bad.url);
      expect(run.stderr).toBe('');
      expect(run.code).toBe(1);
      expect(run.stdout).toMatch(/^maxmemory-policy\s+finding\s+allkeys-lru$/m);
      expect(run.stdout).toContain('fix maxmemory-policy: set maxmemory-policy noeviction');
      expect(run.stdout).toMatch(/^hz\s+finding\s+10; /m);
      expect(run.stdout).toContain('fix hz: set hz 100');
      expect(run.stdout.trimEnd().split('\n').at(-1)).toBe('2 findings');

      const json = await doctor('--redis', bad.url, '--json');
      expect(json.code).toBe(1);
      const report = JSON.parse(json.stdout) as {
        ok: boolean;
        findings: number;
        checks: { check: string; status: string }[];
        facts: {
          nodes: { maxmemoryPolicy: string; hz: number; blockingOvershoot: { medianMs: number } }[];
        };
      };
      expect(report).toMatchObject({ ok: false, findings: 2 });
      expect(report.checks.filter((c) => c.status === 'finding').map((c) => c.check)).toEqual([
        'maxmemory-policy',
        'hz',
      ]);
      expect(report.facts.nodes).toHaveLength(1);
      expect(report.facts.nodes[0]).toMatchObject({ maxmemoryPolicy: 'allkeys-lru', hz: 10 });
      // At hz 10 a 50 ms wait ends on one of Redis's 100 ms ticks: late, measurably.
      expect(report.facts.nodes[0]!.blockingOvershoot.medianMs).toBeGreaterThan(5);
    },
  );

  it(
    'on a Redis Cluster: each --queue’s keys, as the workers name them there, in one slot',
    { timeout: CLI_TIMEOUT_MS * 2 },
    async () => {
      const cluster = await startRedisCluster({ basePort: 7360, portRange: 30 });
      try {
        const run = await doctor(
          '--redis',
          cluster.url,
          '--cluster',
          '--queue',
          'orders',
          '--queue',
          '{billing}',
        );
        expect(run.stderr).toBe('');
        expect(run.stdout).toMatch(
          /^cluster\s+info\s+enabled \(Redis Cluster, 3 masters checked\)$/m,
        );
        // Each master's settings, named by the node.
        for (const port of cluster.ports)
          expect(run.stdout).toMatch(
            new RegExp(`^maxmemory-policy @ 127\\.0\\.0\\.1:${port}\\s+ok\\s+noeviction$`, 'm'),
          );
        // `bull:{orders}:orders:wait`, `requeue:{orders}:dead` … all hash by the tag `orders`.
        const node = new Redis(cluster.url);
        const slot = await node.cluster('KEYSLOT', 'orders').finally(() => node.disconnect());
        expect(run.stdout).toMatch(
          new RegExp(`^slots of orders\\s+ok\\s+all 5 keys in slot ${slot}$`, 'm'),
        );
        expect(run.stdout).toMatch(/^slots of \{billing\}\s+ok\s+all 5 keys in slot \d+$/m);
        // The cluster's nodes run without the AOF: that, and only that, is a finding, on each.
        expect(run.stdout.match(/^appendonly @ \S+\s+finding\s+no$/gm)).toHaveLength(3);
        expect(run.stdout.trimEnd().split('\n').at(-1)).toBe('3 findings');
        expect(run.code).toBe(1);
      } finally {
        await cluster.stop();
      }
    },
  );

  it(
    'a Redis it cannot reach, or a bad --queue, is one line and exit 2',
    { timeout: CLI_TIMEOUT_MS },
    async () => {
      const down = await doctor('--redis', 'redis://127.0.0.1:7399');
      expect(down.code).toBe(2);
      expect(down.stdout).toBe('');
      expect(down.stderr).toMatch(
        /^requeue: --redis: cannot reach Redis at redis:\/\/127\.0\.0\.1:7399 .*\n$/,
      );
      const badQueue = await doctor('--redis', good.url, '--queue', 'a b');
      expect(badQueue.code).toBe(2);
      expect(badQueue.stderr.split('\n')).toHaveLength(2);
      expect(badQueue.stderr).toContain('--queue');
    },
  );
});
