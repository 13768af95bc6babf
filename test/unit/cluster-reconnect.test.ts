import { describe, expect, it } from 'vitest';
import { startupNodeId } from '../../src/redis/cluster-reconnect.js';
import { createCluster } from '../../src/redis/connection.js';

/** What `cluster-reconnect.ts` reads and replaces on an ioredis Cluster (5.x). */
interface Internals {
  startupNodes: unknown[];
  connect: unknown;
}

describe('mendClusterReconnect', () => {
  it("finds ioredis's startup nodes where it reads them (a tripwire for an ioredis upgrade)", () => {
    const cluster = createCluster('redis://127.0.0.1:7999', {}, { lazyConnect: true });
    try {
      const internals = cluster as unknown as Internals;
      expect(internals.startupNodes).toEqual([{ host: '127.0.0.1', port: 7999 }]);
      // Its own connect(), not the prototype's.
      expect(Object.hasOwn(cluster, 'connect')).toBe(true);
    } finally {
      cluster.disconnect();
    }
  });

  it('gives a duplicate the startup nodes the original has, and mends it too', () => {
    const cluster = createCluster('redis://127.0.0.1:7999', {}, { lazyConnect: true });
    const copy = cluster.duplicate();
    try {
      expect((copy as unknown as Internals).startupNodes).toEqual([
        { host: '127.0.0.1', port: 7999 },
      ]);
      expect(Object.hasOwn(copy, 'connect')).toBe(true);
      expect(Object.hasOwn(copy, 'duplicate')).toBe(true);
    } finally {
      copy.disconnect();
      cluster.disconnect();
    }
  });

  it('names a startup node the same however it is given', () => {
    expect(startupNodeId(7000)).toBe('127.0.0.1:7000');
    expect(startupNodeId('7000')).toBe('127.0.0.1:7000');
    expect(startupNodeId('10.0.0.1:7000')).toBe('10.0.0.1:7000');
    expect(startupNodeId('redis://10.0.0.1:7000')).toBe('10.0.0.1:7000');
    expect(startupNodeId('redis://10.0.0.1')).toBe('10.0.0.1:6379');
    expect(startupNodeId({ host: '10.0.0.1', port: 7000 })).toBe('10.0.0.1:7000');
    expect(startupNodeId({ port: 7000 })).toBe('127.0.0.1:7000');
  });
});
