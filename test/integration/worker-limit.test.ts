import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { createQueue } from '../../src/scheduler/queue.js';
import { createWorker } from '../../src/scheduler/requeue-worker.js';
import { onCleanup } from '../harness/cleanup.js';
import { cleanQueue, connect, redisUrl, uniqueQueueName } from '../harness/redis.js';

const admin = connect();
afterAll(() => admin.disconnect());
const logger = createLogger({ level: 'silent' });

/**
 * A dependency past its knee: 20 ms up to 4 calls at once, ×1.25 per call
 * beyond (seed 004's latency law), as measured when each call starts.
 */
function slowingDependency() {
  let inFlight = 0;
  let peak = 0;
  return {
    get peak() {
      return peak;
    },
    async call(): Promise<void> {
      inFlight++;
      peak = Math.max(peak, inFlight);
      const ms = 20 * 1.25 ** Math.max(0, inFlight - 4);
      await new Promise((resolve) => setTimeout(resolve, Math.min(ms, 5_000)));
      inFlight--;
    },
  };
}

async function run(concurrencyLimit: false | undefined): Promise<number> {
  const name = uniqueQueueName('worker-limit');
  const dep = slowingDependency();
  const queue = createQueue<{ i: number }>(name, { connection: redisUrl() });
  const jobs = 300;
  let done = 0;
  const worker = createWorker<{ i: number }>(name, () => dep.call(), {
    connection: redisUrl(),
    concurrency: 50,
    logger,
    ...(concurrencyLimit === false ? { concurrencyLimit } : {}),
  });
  onCleanup(async () => {
    await worker.close({ timeoutMs: 5_000 });
    await queue.close();
    await cleanQueue(admin, name);
  });
  const finished = new Promise<void>((resolve) =>
    worker.on('job:completed', () => {
      if (++done === jobs) resolve();
    }),
  );
  await worker.waitUntilReady();
  await queue.addBulk(Array.from({ length: jobs }, (_, i) => ({ name: 'call', data: { i } })));
  await finished;
  return dep.peak;
}

describe('the worker’s concurrency limit (on by default)', () => {
  it(
    'keeps a slowing dependency near its knee instead of sending it the whole concurrency',
    { timeout: 120_000 },
    async () => {
      const bare = await run(false);
      const limited = await run(undefined);
      // Bare, BullMQ fetches 50 at once; the limit starts at 10 and backs off on latency.
      expect(bare).toBe(50);
      expect(limited).toBeLessThanOrEqual(20);
    },
  );
});
