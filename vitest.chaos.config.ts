import { defineConfig } from 'vitest/config';

/**
 * The chaos suites (test/chaos/*.chaos.ts): long, each with a redis-server
 * and worker processes of its own, so `vitest run` (vitest.config.ts) leaves
 * them out. Run them through `npm run test:chaos`, one file at a time; their
 * sizes come from CHAOS_* variables (see each suite and .ci/run).
 */
export default defineConfig({
  test: {
    include: ['test/chaos/**/*.chaos.ts'],
    testTimeout: 15 * 60 * 1000,
    hookTimeout: 60_000,
    fileParallelism: false,
    maxWorkers: 1,
  },
});
