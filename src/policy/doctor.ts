import { certainSkewMs } from './clock-offset.js';

/**
 * `requeue doctor`'s judgement, as a pure function: what was read of a Redis
 * (by `src/cli/commands/doctor.ts`) in, one verdict per check out, each
 * finding saying what to change. A fact that could not be read is `unknown`
 * with where to look, never a failure.
 */

/** The Redis version requeue is built and tested on. */
export const requeueMinimumRedis = '7.0.0';

/** The retry-timing figure the README's "Retry timing" section recommends. */
export const recommendedHz = 100;

/** A clock skew past this (ms) between a host and Redis is a finding. */
export const maxSkewMs = 500;

/** What could not be read, and where to look instead. */
export interface Unreadable {
  unreadable: string;
}

/** A value, or why it could not be read. */
export type Fact<T> = T | Unreadable;

/** What `requeue doctor` reads of one Redis server (each master, on a Cluster). */
export interface NodeFacts {
  /** `host:port`, as the Cluster names it; empty for a single Redis. */
  node: string;
  /** `redis_version` of INFO server. */
  version: Fact<string>;
  /** `maxmemory-policy`. */
  maxmemoryPolicy: Fact<string>;
  /** `appendonly` (`yes`/`no`). */
  appendonly: Fact<string>;
  /** `appendfsync` (`always`/`everysec`/`no`); CONFIG GET only. */
  appendfsync: Fact<string>;
  /** The server's `hz` (INFO server's `hz`, the running value). */
  hz: Fact<number>;
  /**
   * How much later than asked a blocking wait nothing ends early timed out
   * (what an idle worker's retry waits on), less the round trip.
   */
  blockingOvershoot: Fact<{ timeoutMs: number; samples: number; medianMs: number; maxMs: number }>;
}

/** Everything `requeue doctor` reads (read-only) of a Redis and of this host. */
export interface RedisFacts {
  /** The server, or each master of a Cluster. */
  nodes: NodeFacts[];
  /** `cluster_enabled` of INFO cluster. */
  cluster: Fact<boolean>;
  /** Each `--queue`'s keys and their slots (`CLUSTER KEYSLOT`), on a Cluster. */
  queues: { name: string; slots: Fact<Record<string, number>> }[];
  /** Redis's clock minus this host's, compensated by half the best round trip. */
  skew: Fact<{ skewMs: number; roundTripMs: number }>;
  /** The BullMQ the workers run, and its minimum Redis version. */
  bullmq: { version: string; minimumRedis: string };
  requeueVersion: string;
}

/** One check's verdict. */
export interface Check {
  /** What was checked, e.g. `maxmemory-policy`. */
  check: string;
  /** `finding`: something to change; `unknown`: could not be read (not counted as a finding). */
  status: 'ok' | 'finding' | 'unknown' | 'info';
  /** What was found, one line. */
  value: string;
  /** What to change (findings), or where to look (unknown). */
  advice?: string;
}

/** The doctor's report. */
export interface Diagnosis {
  /** No findings (unknowns aside). */
  ok: boolean;
  findings: number;
  checks: Check[];
}

function isUnreadable<T>(fact: Fact<T>): fact is Unreadable {
  return typeof fact === 'object' && fact !== null && 'unreadable' in fact;
}

/** `a < b` for dotted versions (`7.0.15` < `7.2.0`); missing parts count as 0. */
export function versionBelow(a: string, b: string): boolean {
  const pa = a.split('.').map((p) => Number.parseInt(p, 10) || 0);
  const pb = b.split('.').map((p) => Number.parseInt(p, 10) || 0);
  for (let i = 0; i < Math.max(pa.length, pb.length); i += 1) {
    const x = pa[i] ?? 0;
    const y = pb[i] ?? 0;
    if (x !== y) return x < y;
  }
  return false;
}

/** Judges what was read: one {@link Check} per fact, in a fixed order. */
export function diagnoseRedis(facts: RedisFacts): Diagnosis {
  const checks: Check[] = [
    ...facts.nodes.flatMap((node) => {
      const nodeChecks = [
        versionCheck(node.version, facts.bullmq),
        maxmemoryCheck(node.maxmemoryPolicy),
        ...persistenceChecks(node.appendonly, node.appendfsync),
        hzCheck(node.hz, node.blockingOvershoot),
      ];
      // On a Cluster each master is checked: its checks say which.
      return facts.nodes.length > 1 || node.node !== ''
        ? nodeChecks.map((c) => ({ ...c, check: `${c.check} @ ${node.node}` }))
        : nodeChecks;
    }),
    ...clusterChecks(facts.cluster, facts.queues, facts.nodes.length),
    skewCheck(facts.skew),
    {
      check: 'versions',
      status: 'info',
      value: `requeue ${facts.requeueVersion}, BullMQ ${facts.bullmq.version}`,
    },
  ];
  const findings = checks.filter((c) => c.status === 'finding').length;
  return { ok: findings === 0, findings, checks };
}

function unknown(check: string, fact: Unreadable): Check {
  return { check, status: 'unknown', value: 'could not read', advice: fact.unreadable };
}

function versionCheck(version: Fact<string>, bullmq: RedisFacts['bullmq']): Check {
  const check = 'redis version';
  if (isUnreadable(version)) return unknown(check, version);
  if (versionBelow(version, bullmq.minimumRedis))
    return {
      check,
      status: 'finding',
      value: version,
      advice: `BullMQ ${bullmq.version} refuses Redis below ${bullmq.minimumRedis}; upgrade to ${requeueMinimumRedis} or later`,
    };
  if (versionBelow(version, requeueMinimumRedis))
    return {
      check,
      status: 'finding',
      value: version,
      advice: `requeue is built and tested on Redis ${requeueMinimumRedis} or later; upgrade`,
    };
  return { check, status: 'ok', value: version };
}

function maxmemoryCheck(policy: Fact<string>): Check {
  const check = 'maxmemory-policy';
  if (isUnreadable(policy)) return unknown(check, policy);
  if (policy === 'noeviction') return { check, status: 'ok', value: policy };
  return {
    check,
    status: 'finding',
    value: policy,
    advice:
      'set maxmemory-policy noeviction (redis.conf, or CONFIG SET maxmemory-policy noeviction): ' +
      'under memory pressure Redis would evict job, lock and DLQ keys, losing jobs',
  };
}

function persistenceChecks(appendonly: Fact<string>, appendfsync: Fact<string>): Check[] {
  if (isUnreadable(appendonly)) return [unknown('appendonly', appendonly)];
  if (appendonly !== 'yes')
    return [
      {
        check: 'appendonly',
        status: 'finding',
        value: appendonly,
        advice:
          'set appendonly yes (with appendfsync everysec): without the AOF a Redis restart ' +
          'loses every job, retry and dead job since the last snapshot',
      },
    ];
  const aof: Check = { check: 'appendonly', status: 'ok', value: 'yes' };
  if (isUnreadable(appendfsync)) return [aof, unknown('appendfsync', appendfsync)];
  if (appendfsync === 'everysec' || appendfsync === 'always')
    return [
      aof,
      {
        check: 'appendfsync',
        status: 'ok',
        value:
          appendfsync === 'everysec'
            ? 'everysec (a crash of Redis can lose up to about the last 2 s of writes)'
            : 'always',
      },
    ];
  return [
    aof,
    {
      check: 'appendfsync',
      status: 'finding',
      value: appendfsync,
      advice:
        'set appendfsync everysec: with "no" the OS decides when the AOF reaches the disk ' +
        '(often 30 s of acknowledged writes lost in a crash of the machine)',
    },
  ];
}

function hzCheck(hz: Fact<number>, overshoot: NodeFacts['blockingOvershoot']): Check {
  const check = 'hz';
  const measured = isUnreadable(overshoot)
    ? ''
    : `; a ${overshoot.timeoutMs} ms blocking wait ended ${round(overshoot.medianMs)} ms late ` +
      `in the median, ${round(overshoot.maxMs)} ms at most (${overshoot.samples} waits)`;
  if (isUnreadable(hz)) {
    const value = `could not read${measured}`;
    return { check, status: 'unknown', value, advice: hz.unreadable };
  }
  const value = `${hz}${measured}`;
  if (hz >= recommendedHz) return { check, status: 'ok', value };
  return {
    check,
    status: 'finding',
    value,
    advice:
      `set hz ${recommendedHz} (redis.conf, or CONFIG SET hz ${recommendedHz}): Redis notices a ` +
      `blocking timeout only ${hz} times a second, so a retry nothing else wakes starts up to ` +
      `${Math.round(1000 / Math.max(1, hz))} ms late (README, "Retry timing")`,
  };
}

function clusterChecks(
  cluster: Fact<boolean>,
  queues: RedisFacts['queues'],
  nodes: number,
): Check[] {
  if (isUnreadable(cluster)) return [unknown('cluster', cluster)];
  const mode: Check = {
    check: 'cluster',
    status: 'info',
    value: !cluster
      ? 'disabled (one Redis)'
      : nodes > 1
        ? `enabled (Redis Cluster, ${nodes} masters checked)`
        : 'enabled (Redis Cluster; this node checked, --cluster checks every master)',
  };
  return [
    mode,
    ...queues.map((queue): Check => {
      const check = `slots of ${queue.name}`;
      if (!cluster) return { check, status: 'ok', value: 'one Redis: all its keys on one server' };
      if (isUnreadable(queue.slots)) return unknown(check, queue.slots);
      const slots = [...new Set(Object.values(queue.slots))];
      if (slots.length === 1)
        return {
          check,
          status: 'ok',
          value: `all ${Object.keys(queue.slots).length} keys in slot ${slots[0]}`,
        };
      const where = Object.entries(queue.slots)
        .map(([key, slot]) => `${key} → ${slot}`)
        .join(', ');
      return {
        check,
        status: 'finding',
        value: `${slots.length} slots: ${where}`,
        advice:
          "a queue's scripts touch all of its keys at once, which Redis Cluster allows only " +
          'within one slot: give the workers the cluster connection (REDIS_CLUSTER) so the ' +
          'queue gets its hash tag, or name the queue with one ({orders})',
      };
    }),
  ];
}

function skewCheck(skew: RedisFacts['skew']): Check {
  const check = 'clock skew';
  if (isUnreadable(skew)) return unknown(check, skew);
  const value =
    `Redis ${skew.skewMs >= 0 ? 'ahead by' : 'behind by'} ${round(Math.abs(skew.skewMs))} ms ` +
    `(± ${round(skew.roundTripMs / 2)} ms)`;
  if (certainSkewMs({ offsetMs: skew.skewMs, roundTripMs: skew.roundTripMs }) <= maxSkewMs)
    return { check, status: 'ok', value };
  return {
    check,
    status: 'finding',
    value,
    advice:
      'synchronise the clocks (NTP) of this host and the Redis host: a worker corrects its ' +
      "clock by the offset it measures from Redis's TIME, warns past 1 s and fetches no job " +
      'past its maxClockSkewMs (5 s by default)',
  };
}

function round(ms: number): string {
  return ms >= 10 ? String(Math.round(ms)) : ms.toFixed(1);
}
