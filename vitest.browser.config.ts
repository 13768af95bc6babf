import { defineConfig } from 'vitest/config';

/**
 * The browser suite (test/browser/*.browser.ts): Debian's chromium driven by
 * playwright-core against the service on loopback with a real Redis. Slower
 * than `npm test` and it needs /usr/bin/chromium, so `vitest run`
 * (vitest.config.ts) leaves it out; run it with `npm run test:browser`.
 * Screenshots go to test/browser/screenshots/.
 */
export default defineConfig({
  test: {
    include: ['test/browser/**/*.browser.ts'],
    globalSetup: ['test/harness/global-setup.ts'],
    testTimeout: 120_000,
    hookTimeout: 60_000,
    fileParallelism: false,
    maxWorkers: 1,
  },
});
