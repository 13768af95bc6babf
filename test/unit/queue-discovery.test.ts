import { describe, expect, it } from 'vitest';
import { bullPrefix, requeueKeys } from '../../src/redis/keys.js';
import { queueOfBullKey, queueOfRequeueKey } from '../../src/redis/queue-discovery.js';

/** Names of every shape keys.ts handles: plain, tagged, starting with `}`. */
const names = ['orders', 'a{b}c', 'jobs-{tenant}', '}odd', 'x.y_z-1', 'star*q?[1]'];

describe('queue discovery reads the key layouts of keys.ts backwards', () => {
  it.each(names)('BullMQ keys of %s, on one Redis and on a Cluster', (name) => {
    for (const cluster of [false, true]) {
      for (const suffix of ['meta', 'id', 'wait'])
        expect(queueOfBullKey(`${bullPrefix(name, cluster)}:${name}:${suffix}`)).toBe(name);
    }
  });

  it.each(names)('requeue keys of %s', (name) => {
    const keys = requeueKeys(name);
    for (const key of [keys.dead, keys.breaker('k:1'), keys.deadRecordPrefix + 'id:2', keys.budget])
      expect(queueOfRequeueKey(key)).toBe(name);
  });

  it('a job key or a key of another owner names no queue', () => {
    expect(queueOfBullKey('bull:orders:123:logs')).toBeUndefined();
    expect(queueOfBullKey('other:orders:meta')).toBeUndefined();
    expect(queueOfRequeueKey('requeued:{orders}:dead')).toBeUndefined();
    expect(queueOfRequeueKey('requeue:orders:dead')).toBeUndefined();
  });
});
