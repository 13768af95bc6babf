import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The failover test kills a master of a cluster of its own: it runs in CI's cluster
    // step (vitest.cluster.config.ts), not next to this run's parallel load.
    exclude: ['test/integration/cluster-failover.test.ts', '**/node_modules/**'],
    globalSetup: ['test/harness/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Integration suites start worker processes of their own; two cores are shared.
    fileParallelism: true,
    maxWorkers: 2,
  },
});
