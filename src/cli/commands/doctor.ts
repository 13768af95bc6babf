import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';
import type { Command } from 'commander';
import { isCluster, type RedisClient } from '../../redis/connection.js';
import {
  diagnoseRedis,
  type Check,
  type Fact,
  type NodeFacts,
  type RedisFacts,
} from '../../policy/doctor.js';
import { limits } from '../../policy/limits.js';
import { parseQueueName } from '../../policy/queue-name.js';
import { checkRedis } from '../../redis/check-redis.js';
import { measureClockOffset } from '../../redis/clock-offset.js';
import { bullPrefix, requeueKeys } from '../../redis/keys.js';
import { systemClock } from '../../util/system.js';
import {
  connectTimeoutFrom,
  redisLabel,
  redisUrlFrom,
  type RedisFlags,
  withCliRedis,
  withRedisOption,
} from '../connection-flag.js';
import { CliUsageError, exitCodes } from '../cli-error.js';
import { formatTable } from '../table.js';

/** BullMQ's own floor (its `RedisConnection.minimumVersion`, not exported). */
const bullmqMinimumRedis = '5.0.0';

/** How long each blocking probe asks Redis to wait, and how many are made. */
const probeTimeoutMs = 50;
const probes = 5;

interface DoctorFlags extends RedisFlags {
  queue?: string[];
  json?: boolean;
}

/** `requeue doctor [--queue Q]... [--json]` */
export function registerDoctor(program: Command): void {
  withRedisOption(
    program
      .command('doctor')
      .description(
        'Check the Redis requeue would use (read-only) and say what to change; exit 1 with findings',
      )
      .option(
        '--queue <name>',
        "also check that this queue's keys share one Cluster slot (repeatable)",
        (value: string, previous: string[] = []) => [...previous, value],
      )
      .option('--json', 'print {"ok", "findings", "checks": [...], "facts": {...}} as JSON'),
  ).action(async (opts: DoctorFlags) => {
    const queues = (opts.queue ?? []).map((name) => parseQueueName(name, '--queue'));
    if (queues.length > limits.doctorQueues)
      throw new CliUsageError(`--queue: at most ${limits.doctorQueues}, got ${queues.length}`);
    const url = redisUrlFrom(opts);
    // Unreachable, or a refused password: one line and exit code 2 (not a finding).
    await checkRedis(url, redisLabel(opts), connectTimeoutFrom(opts));
    const facts = await withCliRedis(opts, (redis) => gatherFacts(redis, queues));
    const diagnosis = diagnoseRedis(facts);
    if (opts.json) {
      process.stdout.write(JSON.stringify({ ...diagnosis, facts }) + '\n');
    } else {
      process.stdout.write(
        formatTable(
          ['CHECK', 'STATUS', 'VALUE'],
          diagnosis.checks.map((c) => [c.check, c.status, c.value]),
        ),
      );
      for (const c of diagnosis.checks.filter((c: Check) => c.advice !== undefined))
        process.stdout.write(
          `${c.status === 'finding' ? 'fix' : 'check'} ${c.check}: ${c.advice}\n`,
        );
      process.stdout.write(
        diagnosis.ok
          ? 'no findings\n'
          : `${diagnosis.findings} finding${diagnosis.findings === 1 ? '' : 's'}\n`,
      );
    }
    process.exitCode = diagnosis.ok ? exitCodes.ok : exitCodes.findings;
  });
}

/** Reads what the doctor judges. Reads only: INFO, CONFIG GET, TIME, WAIT, CLUSTER KEYSLOT. */
async function gatherFacts(redis: RedisClient, queues: string[]): Promise<RedisFacts> {
  // First: a Cluster client knows its nodes once it has connected.
  const info = parseInfo(await redis.info('cluster'));
  const cluster = isCluster(redis) || fromInfo(info, 'cluster_enabled', (v) => v === '1');
  // On a Cluster, every master is asked: one node set up wrong loses that node's queues.
  const masters = isCluster(redis) ? redis.nodes('master') : [];
  const nodes =
    masters.length > 0
      ? masters.map((node) => ({ node: `${node.options.host}:${node.options.port}`, redis: node }))
      : [{ node: '', redis }];
  const nodeFacts: NodeFacts[] = [];
  for (const { node, redis: server } of nodes) nodeFacts.push(await gatherNode(node, server));
  return {
    nodes: nodeFacts,
    cluster,
    queues: await Promise.all(
      queues.map(async (name) => ({
        name,
        slots:
          cluster === true ? await keySlots(redis, name) : { unreadable: 'not a Redis Cluster' },
      })),
    ),
    skew: await measureSkew(redis),
    bullmq: { version: packageVersion('bullmq'), minimumRedis: bullmqMinimumRedis },
    requeueVersion: packageVersion('requeue'),
  };
}

/** One server's settings: INFO, CONFIG GET where allowed, and a timed blocking wait. */
async function gatherNode(node: string, redis: RedisClient): Promise<NodeFacts> {
  const info = parseInfo(await redis.info());
  const config = await configGet(redis, ['maxmemory-policy', 'appendonly', 'appendfsync']);
  return {
    node,
    version: fromInfo(info, 'redis_version', (v) => v),
    maxmemoryPolicy:
      config['maxmemory-policy'] ??
      fromInfo(info, 'maxmemory_policy', (v) => v, 'CONFIG GET maxmemory-policy'),
    appendonly:
      config.appendonly ??
      fromInfo(info, 'aof_enabled', (v) => (v === '1' ? 'yes' : 'no'), 'CONFIG GET appendonly'),
    appendfsync: config.appendfsync ?? {
      unreadable:
        "CONFIG GET is refused here: check your provider's appendfsync (everysec or always)",
    },
    hz: fromInfo(info, 'hz', Number),
    blockingOvershoot: await measureOvershoot(redis, Number(info.get('connected_slaves') ?? 0)),
  };
}

/** INFO's `key:value` lines. */
function parseInfo(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    const at = line.indexOf(':');
    if (at > 0 && !line.startsWith('#')) out.set(line.slice(0, at), line.slice(at + 1).trim());
  }
  return out;
}

function fromInfo<T>(
  info: Map<string, string>,
  field: string,
  parse: (value: string) => T,
  alternative = 'CONFIG GET',
): Fact<T> {
  const raw = info.get(field);
  return raw === undefined
    ? { unreadable: `INFO has no ${field} here; check it with ${alternative}` }
    : parse(raw);
}

/** CONFIG GET, one parameter at a time (managed Redis may refuse CONFIG: then none). */
async function configGet(redis: RedisClient, names: string[]): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of names) {
    try {
      const reply = (await redis.config('GET', name)) as string[];
      if (reply.length >= 2 && reply[1] !== undefined) out[name] = reply[1];
    } catch {
      // Refused (a managed Redis, an ACL): the INFO fallback or "unknown" says so.
    }
  }
  return out;
}

/**
 * Blocking waits nothing ends early, each asking Redis to give up after
 * {@link probeTimeoutMs}: how late it does is how late a retry that nothing
 * else wakes starts (BullMQ waits for a delayed job in a blocking pop, whose
 * timeout Redis notices the same way, on its `hz` ticks). `WAIT` for more
 * replicas than the server has: keyless (any node of a Cluster), writes
 * nothing. The round trip of a PING is taken off.
 */
async function measureOvershoot(
  redis: RedisClient,
  replicas: number,
): Promise<NodeFacts['blockingOvershoot']> {
  try {
    const late: number[] = [];
    for (let i = 0; i < probes; i += 1) {
      const pinged = performance.now();
      await redis.ping();
      const roundTrip = performance.now() - pinged;
      const started = performance.now();
      await redis.call('WAIT', String(replicas + 1), String(probeTimeoutMs));
      late.push(Math.max(0, performance.now() - started - probeTimeoutMs - roundTrip));
    }
    late.sort((a, b) => a - b);
    return {
      timeoutMs: probeTimeoutMs,
      samples: late.length,
      medianMs: hundredths(late[Math.floor(late.length / 2)] ?? 0),
      maxMs: hundredths(late[late.length - 1] ?? 0),
    };
  } catch (err) {
    return { unreadable: `a blocking WAIT failed (${(err as Error).message})` };
  }
}

/** Redis's TIME against this host's clock, on the round trip that was quickest. */
async function measureSkew(redis: RedisClient): Promise<RedisFacts['skew']> {
  try {
    const { offsetMs, roundTripMs } = await measureClockOffset(redis, systemClock, probes);
    return { skewMs: hundredths(offsetMs), roundTripMs: hundredths(roundTripMs) };
  } catch (err) {
    return { unreadable: `TIME failed (${(err as Error).message})` };
  }
}

/** The Cluster slot of each of a queue's keys, as the workers on a Cluster name them. */
async function keySlots(redis: RedisClient, queue: string): Promise<Fact<Record<string, number>>> {
  const bull = `${bullPrefix(queue, true)}:${queue}`;
  const own = requeueKeys(queue);
  const keys = [`${bull}:wait`, `${bull}:delayed`, `${bull}:meta`, own.dead, own.budget];
  try {
    const slots: Record<string, number> = {};
    for (const key of keys) slots[key] = Number(await redis.cluster('KEYSLOT', key));
    return slots;
  } catch (err) {
    return { unreadable: `CLUSTER KEYSLOT failed (${(err as Error).message})` };
  }
}

/** Milliseconds to 0.01 ms: what a timer on this host can tell apart. */
function hundredths(ms: number): number {
  return Math.round(ms * 100) / 100;
}

/** A package's version, from its package.json (requeue's own by its self-reference). */
function packageVersion(name: string): string {
  try {
    const pkg = createRequire(import.meta.url)(`${name}/package.json`) as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    return 'unknown';
  }
}
