import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors/config-error.js';
import { parseBreakerOptions } from '../../src/policy/breaker/breaker-options.js';
import { createWorker } from '../../src/scheduler/requeue-worker.js';

/** Checked before any connection is opened: these never touch Redis. */
describe('a worker refuses bad options with one line naming the field', () => {
  const handler = async (): Promise<void> => undefined;

  it.each([
    ['orders.dlq', {}, /^worker: "orders\.dlq" /],
    ['has space', {}, /^worker: "has space" /],
    ['ok', { concurrency: 0 }, /^worker\.concurrency: /],
    ['ok', { concurrency: 1_000_001 }, /^worker\.concurrency: /],
    ['ok', { attemptTimeoutMs: 10 * 3_600_000 }, /^worker\.attemptTimeoutMs: /],
    ['ok', { lockDurationMs: 5 }, /^worker\.lockDurationMs: /],
    ['ok', { keyConcurrency: 0 }, /^worker\.keyConcurrency: /],
    ['ok', { maxClockSkewMs: 0 }, /^worker\.maxClockSkewMs: /],
    ['ok', { maxClockSkewMs: 2.5 }, /^worker\.maxClockSkewMs: /],
    ['ok', { clockCheckIntervalMs: 10 }, /^worker\.clockCheckIntervalMs: /],
    ['ok', { retryOrder: 'lifo' as never }, /^worker\.retryOrder: /],
    ['ok', { retryShare: 0 }, /^worker\.retryShare: must be more than 0/],
    ['ok', { retryShare: 1.5 }, /^worker\.retryShare: must be at most 1/],
  ])('queue %j with %j', (name, options, message) => {
    let thrown: unknown;
    try {
      createWorker(name, handler, { connection: 'redis://127.0.0.1:1', ...options });
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ConfigError);
    expect((thrown as Error).message).toMatch(message);
    expect((thrown as Error).message).not.toContain('\n');
  });

  it.each([
    [{ windowMs: 2 * 86_400_000 }, 'breaker.windowMs'],
    [{ openMs: 10 ** 12, maxOpenMs: 10 ** 12 }, 'breaker.openMs'],
    [{ halfOpenProbes: 5_000 }, 'breaker.halfOpenProbes'],
    [{ maxDeferrals: 10 ** 9 }, 'breaker.maxDeferrals'],
    [{ halfOpenSuccessRatio: 0 }, 'breaker.halfOpenSuccessRatio'],
  ])('breaker options %j are bounded (%s)', (options, field) => {
    expect(() => parseBreakerOptions(options)).toThrow(
      new RegExp(`^${field.replace('.', '\\.')}: `),
    );
  });
});
