/**
 * Library manners: a host application's stdout is its own. A real process
 * uses requeue as a library against the test Redis (a retry and a death)
 * and its stdout is captured.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { runTs } from '../harness/child.js';
import { cleanedQueueName, connect, redisUrl } from '../harness/redis.js';

const redis = connect();

afterAll(() => {
  redis.disconnect();
});

/** Runs the library-using fixture with `logger` given as LOGGER says. */
function host(logger: 'none' | 'options' | 'pino') {
  return runTs(
    'test/fixtures/library-quiet.ts',
    [],
    // LOG_LEVEL is the host's own setting: the library's default must not take it up.
    {
      REDIS_URL: redisUrl(),
      QUEUE: cleanedQueueName(redis, 'quiet'),
      LOGGER: logger,
      LOG_LEVEL: 'info',
    },
    30_000,
  );
}

describe('the library writes nothing to stdout unless asked', () => {
  it('a worker given no logger printed "retry scheduled" as pino JSON on the host\'s stdout', async () => {
    const result = await host('none');
    expect(result.code).toBe(0);
    expect(result.stdout).toBe('');
    // Retries are not news: at the default level (warn) they are not on stderr either.
    expect(result.stderr).not.toContain('retry scheduled');
  });

  it("pino options make a logger of requeue's own on stderr, never stdout", async () => {
    const result = await host('options');
    expect(result.code).toBe(0);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('"msg":"retry scheduled"');
  });

  it("a pino logger of the host's own is used as is (stdout, because the host asked)", async () => {
    const result = await host('pino');
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('"msg":"retry scheduled"');
  });
});
