import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { parseBullPrefix } from '../../src/policy/queue-name.js';
import { clusterFromEnv, clusterNodeOptions } from '../../src/redis/connection.js';
import { bullPrefix, hasHashTag, queueHashTag, requeueKeys } from '../../src/redis/keys.js';
import { bullKeys } from '../../src/scheduler/bullmq/bull-keys.js';

/** The part of `key` Redis Cluster hashes: its hash tag, else the whole key (as Redis does it). */
function hashedPart(key: string): string {
  const open = key.indexOf('{');
  if (open < 0) return key;
  const close = key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : key;
}

/** Every key of a queue requeue and BullMQ use (a sample from each module). */
function keysOf(name: string, cluster: boolean): string[] {
  const bull = bullKeys(name, bullPrefix(name, cluster));
  const rq = requeueKeys(name);
  return [
    bull.wait,
    bull.active,
    bull.meta,
    `${bull.prefix}some-job-id`,
    `${bull.prefix}some-job-id:lock`,
    rq.dead,
    `${rq.deadRecordPrefix}some-job-id`,
    rq.breaker('endpoint-1'),
    rq.breakerWindow('endpoint-1'),
    rq.budget,
    rq.pausedKeys,
  ];
}

describe('the key layout on one Redis and on a cluster', () => {
  it('keeps the single-node layout: bull:<name>:…', () => {
    expect(bullPrefix('orders', false)).toBe('bull');
    expect(bullKeys('orders', bullPrefix('orders', false)).wait).toBe('bull:orders:wait');
  });

  it('puts a plain name’s hash tag in the prefix on a cluster: bull:{orders}:orders:…', () => {
    expect(bullPrefix('orders', true)).toBe('bull:{orders}');
    expect(bullKeys('orders', bullPrefix('orders', true)).wait).toBe('bull:{orders}:orders:wait');
    expect(requeueKeys('orders').dead).toBe('requeue:{orders}:dead');
    expect(bullPrefix('orders', true, 'myapp')).toBe('myapp:{orders}');
  });

  it('leaves a name with its own tag alone, and never wraps a tag twice', () => {
    expect(bullPrefix('{cq}', true)).toBe('bull');
    expect(requeueKeys('{cq}').dead).toBe('requeue:{cq}:dead');
    expect(requeueKeys('jobs-{cq}').dead).toBe('requeue:jobs-{cq}:dead');
  });

  it('follows Redis’s rule for an empty tag: "{}" is no tag', () => {
    expect(hasHashTag('a{}b')).toBe(false);
    expect(hasHashTag('a{}b{c}')).toBe(false);
    expect(hasHashTag('a{b}')).toBe(true);
    expect(queueHashTag('a{}b')).toBe('{a{}b}');
  });

  it('a name starting with "}" still gets a tag (`{}a}` would be empty: its keys spread over slots)', () => {
    expect(queueHashTag('}a')).toBe('{%7Da}');
    expect(new Set(keysOf('}a', true).map(hashedPart))).toEqual(new Set(['%7Da']));
  });

  it('every key of a queue hashes by the same part on a cluster, for any valid name', () => {
    const nameChars = fc.constantFrom(...'ab-_.{}xyz019'.split(''));
    fc.assert(
      fc.property(fc.string({ unit: nameChars, minLength: 1, maxLength: 12 }), (name) => {
        const parts = new Set(keysOf(name, true).map(hashedPart));
        expect(parts.size, `${name}: ${[...parts].join(' | ')}`).toBe(1);
      }),
      { numRuns: 2_000 },
    );
  });
});

describe('the prefix option', () => {
  it('refuses braces and spaces, naming the option', () => {
    expect(() => parseBullPrefix('{app}', 'queue.prefix')).toThrow(
      /^queue\.prefix: must not contain "\{"/,
    );
    expect(() => parseBullPrefix('my app', 'worker.prefix')).toThrow(/^worker\.prefix: .*spaces/);
    expect(() => parseBullPrefix('', 'prefix')).toThrow(/^prefix: must not be empty/);
    expect(parseBullPrefix('myapp:bull')).toBe('myapp:bull');
  });
});

describe('cluster connections from the environment', () => {
  it('REDIS_CLUSTER turns a cluster on with 1, true, yes or on', () => {
    for (const on of ['1', 'true', 'YES', ' on '])
      expect(clusterFromEnv({ REDIS_CLUSTER: on })).toBe(true);
    for (const off of [undefined, '', '0', 'false', 'no'])
      expect(clusterFromEnv({ REDIS_CLUSTER: off })).toBe(false);
  });

  it('a seed URL’s credentials and TLS apply to every node', () => {
    expect(clusterNodeOptions('rediss://ops:p%40ss@redis.example.com:6380')).toEqual({
      username: 'ops',
      password: 'p@ss',
      tls: {},
    });
    expect(clusterNodeOptions('redis://:secret@127.0.0.1:7000')).toEqual({ password: 'secret' });
    expect(clusterNodeOptions('redis://127.0.0.1:7000')).toEqual({});
  });
});
