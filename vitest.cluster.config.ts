import { defineConfig } from 'vitest/config';

/**
 * The integration tests run again on a local 3-master Redis Cluster
 * (`npm run test:cluster`): test/harness/global-setup.ts starts it
 * (test/harness/cluster.ts, ports from REQUEUE_TEST_CLUSTER_PORT, else 7100)
 * and sets REDIS_CLUSTER=1, so the code under test, and the processes the
 * tests start, connect to it as an ioredis Cluster with plain queue names,
 * which land on different masters.
 *
 * Left out, because they cannot run on a cluster, not because they fail:
 * harness.test.ts (bare BullMQ on a plain name: CROSSSLOT, the problem requeue
 * solves), job-moves.test.ts and job-moves-deaths.test.ts (BullMQ's
 * single-node key layout, pinned on purpose), read-only-status.test.ts and
 * read-only-dlq-metrics.test.ts (MONITOR watches one node), and the files
 * that start single-node redis-servers of their own (shutdown, service, edges,
 * embedded-redis, demo, model-found, metrics, admin-api, admin-api-access,
 * doctor).
 */
process.env.REQUEUE_TEST_CLUSTER = '1';

export default defineConfig({
  test: {
    include: [
      // retries, the DLQ and replay
      'test/integration/scheduler.test.ts',
      'test/integration/scheduler-dlq.test.ts',
      'test/integration/core-regressions.test.ts',
      // the breaker and the budget
      'test/integration/breaker.test.ts',
      'test/integration/breaker-concurrency.test.ts',
      'test/integration/breaker-budget.test.ts',
      'test/integration/breaker-cli.test.ts',
      'test/integration/budget-model.test.ts',
      'test/integration/window-lua.test.ts',
      // webhooks and streams
      'test/integration/webhook.test.ts',
      'test/integration/webhook-main.test.ts',
      'test/integration/webhook-isolation.test.ts',
      'test/integration/stream.test.ts',
      'test/integration/stream-claims.test.ts',
      // fair dispatch: the stamp's MULTI and the fair set share the queue's slot
      'test/integration/fair-dispatch.test.ts',
      // the CLI, crashed workers, and the cluster's own test
      'test/integration/cli.test.ts',
      'test/integration/cli-queues.test.ts',
      'test/integration/crash.test.ts',
      'test/integration/cluster.test.ts',
      // a master killed, its replica promoted (a cluster of its own, with replicas)
      'test/integration/cluster-failover.test.ts',
    ],
    globalSetup: ['test/harness/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    fileParallelism: true,
    maxWorkers: 2,
  },
});
