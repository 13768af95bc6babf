import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseRetryPolicy } from '../../src/policy/retry-policy.js';
import { seededRandom } from '../../src/util/random.js';
import { defaultProtections, runReal } from '../../bench/outage/real-run.js';
import { cleanedQueueName, connect } from '../harness/redis.js';

// The outage bench's protected run (`npm run bench:outage -- --protect`), small:
// the built package's worker with defaultProtections(), against the bench's
// loopback latency server, stopped 0.5 s in and never resumed.
let redis: Redis;
beforeAll(() => {
  redis = connect();
});
afterAll(() => {
  redis.disconnect();
});

describe('outage bench, protected run', () => {
  it(
    'accepts the default protections and its breaker opens against a stopped server',
    { timeout: 40_000 },
    async () => {
      const run = await runReal(
        'fixed',
        {
          clients: 40,
          seed: 1,
          meanGapMs: 100,
          timeoutMs: 200,
          stopAtMs: 500,
          stopForMs: 60_000,
          // The breaker counts failing jobs, each once (a retry that fails again adds
          // nothing): these 40 clients' 40 jobs outweigh the ~200 successes before the
          // stop only once those leave the 10 s window.
          durationMs: 14_000,
          server: {
            minDelayMs: 10,
            concurrencyLimit: 100,
            latencyFactor: 1.05,
            latencyK: 10,
            backlog: 1_000,
          },
          policy: parseRetryPolicy({ baseMs: 50, capMs: 1_000 }),
        },
        redis,
        cleanedQueueName(redis, 'outage-protect'),
        seededRandom(1),
        { protect: true },
      );
      expect(defaultProtections()).toEqual({ breaker: {}, budget: {} });
      // Requests got through before the stop, so the worker ran with those options.
      expect(run.perSecond[0]!.ok).toBeGreaterThan(0);
      expect(run.protection.opened).toBeGreaterThanOrEqual(1);
      // Open, the queue's breaker stops the fetching (openMs 5 s: the run ends before its first probe).
      expect(run.perSecond.at(-1)!.timeouts).toBe(0);
      expect(run.dead).toBe(0);
    },
  );
});
