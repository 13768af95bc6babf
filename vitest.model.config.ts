import { defineConfig } from 'vitest/config';

/**
 * The model-based suite (test/model/*.model.ts): slow, with a Redis and
 * worker processes of its own, so `vitest run` (vitest.config.ts) leaves it
 * out. Run it through `npm run test:model`, which passes the seed and the
 * number of runs.
 */
export default defineConfig({
  test: {
    include: ['test/model/**/*.model.ts'],
    // fast-check bounds the run (MODEL_TIME_LIMIT_MS); this only stops a wedged one.
    testTimeout: 60 * 60 * 1000,
    hookTimeout: 60_000,
    fileParallelism: false,
    maxWorkers: 1,
  },
});
