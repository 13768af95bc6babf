import type { TestProject } from 'vitest/node';
import { existsSync } from 'node:fs';
import { hasRedisServer, startRedisServer } from '../../src/redis/redis-server.js';
import { startRedisCluster } from './cluster.js';

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
    redisSource: string;
    /** The run's Redis is a Redis Cluster (REQUEUE_TEST_CLUSTER=1). */
    redisCluster: boolean;
  }
}

/** Whether a Docker engine answers, without waiting on testcontainers' long probes. */
function dockerEngineLikely(): boolean {
  if (process.env.DOCKER_HOST) return true;
  return existsSync('/var/run/docker.sock');
}

/**
 * Provides one Redis for the whole run: `REDIS_URL` if set; else a
 * testcontainers Redis where a Docker engine answers; else a private
 * `redis-server` from PATH; else a message saying what to install.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const onCluster = /^(1|true|yes)$/i.test(process.env.REQUEUE_TEST_CLUSTER ?? '');
  project.provide('redisCluster', onCluster);
  if (onCluster) {
    // A local 3-master cluster (ports from REQUEUE_TEST_CLUSTER_PORT, else
    // 7100); REDIS_CLUSTER=1 makes every connection the code under test opens
    // from a URL, in this process and the children tests start, a Cluster.
    process.env.REDIS_CLUSTER = '1';
    const cluster = await startRedisCluster();
    project.provide('redisUrl', cluster.url);
    project.provide('redisSource', `redis-cluster (${cluster.ports.join(', ')})`);
    return () => cluster.stop();
  }
  if (process.env.REDIS_URL) {
    project.provide('redisUrl', process.env.REDIS_URL);
    project.provide('redisSource', 'REDIS_URL');
    return async () => undefined;
  }
  if (dockerEngineLikely()) {
    try {
      const { RedisContainer } = await import('@testcontainers/redis');
      const container = await new RedisContainer('redis:7-alpine')
        .withCommand(['redis-server', '--maxmemory-policy', 'noeviction', '--appendonly', 'yes'])
        .start();
      project.provide('redisUrl', container.getConnectionUrl());
      project.provide('redisSource', 'testcontainers');
      return async () => {
        await container.stop();
      };
    } catch (err) {
      console.warn(
        `[harness] no Docker engine answered (${(err as Error).message}); trying redis-server`,
      );
    }
  }
  if (await hasRedisServer()) {
    const server = await startRedisServer({ appendonly: false });
    project.provide('redisUrl', server.url);
    project.provide('redisSource', 'redis-server');
    return () => server.stop();
  }
  throw new Error(
    'The integration tests need a Redis 7. Set REDIS_URL to one, start a Docker engine (testcontainers ' +
      'will run redis:7-alpine), or install redis-server (apt-get install redis-server, brew install redis).',
  );
}
