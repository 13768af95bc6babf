import { describe, expect, it } from 'vitest';
import {
  diagnoseRedis,
  versionBelow,
  type NodeFacts,
  type RedisFacts,
} from '../../src/policy/doctor.js';

/** A server as requeue wants it. */
const goodNode: NodeFacts = {
  node: '',
  version: '7.2.4',
  maxmemoryPolicy: 'noeviction',
  appendonly: 'yes',
  appendfsync: 'everysec',
  hz: 100,
  blockingOvershoot: { timeoutMs: 50, samples: 5, medianMs: 4.2, maxMs: 9.1 },
};

/** One such Redis: every check passes. */
const healthy: RedisFacts = {
  nodes: [goodNode],
  cluster: false,
  queues: [],
  skew: { skewMs: 3, roundTripMs: 0.4 },
  bullmq: { version: '6.7.0', minimumRedis: '5.0.0' },
  requeueVersion: '0.1.0',
};

/** The healthy Redis with its one server changed. */
const withNode = (change: Partial<NodeFacts>): RedisFacts => ({
  ...healthy,
  nodes: [{ ...goodNode, ...change }],
});

const statusOf = (facts: RedisFacts, check: string) =>
  diagnoseRedis(facts).checks.find((c) => c.check === check);

describe('requeue doctor: the diagnosis', () => {
  it('passes a well-configured Redis with no findings', () => {
    const d = diagnoseRedis(healthy);
    expect(d).toMatchObject({ ok: true, findings: 0 });
    expect(d.checks.filter((c) => c.status === 'finding' || c.status === 'unknown')).toEqual([]);
    expect(d.checks.map((c) => c.check)).toEqual([
      'redis version',
      'maxmemory-policy',
      'appendonly',
      'appendfsync',
      'hz',
      'cluster',
      'clock skew',
      'versions',
    ]);
    expect(statusOf(healthy, 'versions')?.value).toBe('requeue 0.1.0, BullMQ 6.7.0');
  });

  it.each(['allkeys-lru', 'volatile-lru', 'allkeys-random', 'volatile-ttl'])(
    'names maxmemory-policy %s as a finding and says to set noeviction',
    (policy) => {
      const d = diagnoseRedis(withNode({ maxmemoryPolicy: policy }));
      expect(d).toMatchObject({ ok: false, findings: 1 });
      const check = statusOf(withNode({ maxmemoryPolicy: policy }), 'maxmemory-policy');
      expect(check).toMatchObject({ status: 'finding', value: policy });
      expect(check?.advice).toContain('noeviction');
    },
  );

  it('wants the AOF on, fsynced every second or always', () => {
    expect(statusOf(withNode({ appendonly: 'no' }), 'appendonly')).toMatchObject({
      status: 'finding',
      value: 'no',
    });
    // With the AOF off, its fsync policy is beside the point: one finding, not two.
    expect(diagnoseRedis(withNode({ appendonly: 'no' })).findings).toBe(1);
    expect(statusOf(withNode({ appendfsync: 'no' }), 'appendfsync')?.status).toBe('finding');
    expect(statusOf(withNode({ appendfsync: 'always' }), 'appendfsync')?.status).toBe('ok');
  });

  it('relates hz to retry timing, with the measured overshoot', () => {
    const slow = withNode({
      hz: 10,
      blockingOvershoot: { timeoutMs: 50, samples: 5, medianMs: 51.3, maxMs: 88 },
    });
    const check = statusOf(slow, 'hz');
    expect(check).toMatchObject({ status: 'finding' });
    expect(check?.value).toBe(
      '10; a 50 ms blocking wait ended 51 ms late in the median, 88 ms at most (5 waits)',
    );
    expect(check?.advice).toContain('up to 100 ms late');
    expect(check?.advice).toContain('Retry timing');
    expect(statusOf(withNode({ hz: 500 }), 'hz')?.status).toBe('ok');
  });

  it('checks the version against BullMQ’s floor and requeue’s', () => {
    expect(statusOf(withNode({ version: '4.0.14' }), 'redis version')?.advice).toContain(
      'BullMQ 6.7.0 refuses',
    );
    expect(statusOf(withNode({ version: '6.2.14' }), 'redis version')?.status).toBe('finding');
    expect(statusOf(withNode({ version: '7.0.0' }), 'redis version')?.status).toBe('ok');
    expect(versionBelow('6.2.14', '7.0.0')).toBe(true);
    expect(versionBelow('7.0.15', '7.0.2')).toBe(false);
    expect(versionBelow('10.0.0', '7.0.0')).toBe(false);
    expect(versionBelow('7', '7.0.0')).toBe(false);
  });

  it('flags a clock skew beyond what the round trip explains', () => {
    expect(
      statusOf({ ...healthy, skew: { skewMs: -2_000, roundTripMs: 1 } }, 'clock skew'),
    ).toMatchObject({ status: 'finding', value: 'Redis behind by 2000 ms (± 0.5 ms)' });
    // 700 ms apart, but a 600 ms round trip could explain 300 of it: within the bound.
    expect(
      statusOf({ ...healthy, skew: { skewMs: 700, roundTripMs: 600 } }, 'clock skew')?.status,
    ).toBe('ok');
  });

  it('on a Cluster, wants each queue’s keys in one slot', () => {
    const facts: RedisFacts = {
      ...healthy,
      cluster: true,
      queues: [
        { name: 'tagged', slots: { 'bull:{tagged}:tagged:wait': 7, 'requeue:{tagged}:dead': 7 } },
        { name: 'split', slots: { 'bull:split:wait': 1, 'requeue:{split}:dead': 2 } },
      ],
    };
    expect(statusOf(facts, 'slots of tagged')).toMatchObject({
      status: 'ok',
      value: 'all 2 keys in slot 7',
    });
    expect(statusOf(facts, 'slots of split')).toMatchObject({ status: 'finding' });
    expect(statusOf(facts, 'slots of split')?.value).toContain('bull:split:wait → 1');
    // On one Redis there is nothing to split.
    expect(
      statusOf({ ...healthy, queues: [{ name: 'q', slots: { unreadable: 'x' } }] }, 'slots of q')
        ?.status,
    ).toBe('ok');
  });

  it('on a Cluster, checks every master and says which one is wrong', () => {
    const facts: RedisFacts = {
      ...healthy,
      cluster: true,
      nodes: [
        { ...goodNode, node: '10.0.0.1:6379' },
        { ...goodNode, node: '10.0.0.2:6379', maxmemoryPolicy: 'allkeys-lru' },
      ],
    };
    const d = diagnoseRedis(facts);
    expect(d).toMatchObject({ ok: false, findings: 1 });
    expect(statusOf(facts, 'maxmemory-policy @ 10.0.0.2:6379')).toMatchObject({
      status: 'finding',
      value: 'allkeys-lru',
    });
    expect(statusOf(facts, 'maxmemory-policy @ 10.0.0.1:6379')?.status).toBe('ok');
    expect(statusOf(facts, 'cluster')?.value).toBe('enabled (Redis Cluster, 2 masters checked)');
  });

  it('says what it could not read, and where to look, without counting it as a finding', () => {
    const managed = withNode({
      appendfsync: { unreadable: 'CONFIG GET is refused here: check your provider' },
      hz: { unreadable: 'INFO has no hz here' },
    });
    const d = diagnoseRedis(managed);
    expect(d).toMatchObject({ ok: true, findings: 0 });
    expect(statusOf(managed, 'appendfsync')).toEqual({
      check: 'appendfsync',
      status: 'unknown',
      value: 'could not read',
      advice: 'CONFIG GET is refused here: check your provider',
    });
    expect(statusOf(managed, 'hz')?.value).toContain('could not read; a 50 ms blocking wait');
  });
});
