/**
 * A worker's close past its deadline (a handler that outlives it) against a
 * connection its caller passed: BullMQ's `disconnect()`, which the forced
 * close used to call, ended that connection too, under every other user of
 * it (the service's other workers and queues, a library user's own reads).
 * Processes still exit in time: `test/integration/shutdown.test.ts`.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { createQueue } from '../../src/scheduler/queue.js';
import { createWorker } from '../../src/scheduler/requeue-worker.js';
import { onCleanup } from '../harness/cleanup.js';
import { cleanedQueueName, connect, redisUrl } from '../harness/redis.js';
import { gate } from '../harness/worker-events.js';

const logger = createLogger({ level: 'silent' });
const admin = connect();
afterAll(() => admin.disconnect());

describe('a forced close', () => {
  it('leaves open the connection its caller passed (BullMQ’s disconnect ended it)', async () => {
    const name = cleanedQueueName(admin, 'forced-close');
    const connection = connect();
    onCleanup(() => connection.disconnect());
    const queue = createQueue(name, { connection: redisUrl() });
    onCleanup(() => queue.close());
    const started = gate();
    const aborted = gate();
    // Runs past the close's deadline; gives up only when the close aborts it.
    const worker = createWorker(
      name,
      (job) =>
        new Promise((_, reject) => {
          job.signal.addEventListener('abort', () => {
            reject(new Error('aborted by the close'));
            aborted.open();
          });
          started.open();
        }),
      { connection, logger, policy: { strategy: 'fixed', baseMs: 10, capMs: 10 } },
    );
    await worker.waitUntilReady();
    await queue.add('hang', {});
    await started.promise;

    await worker.close({ timeoutMs: 300 });
    await aborted.promise;

    expect(connection.status).toBe('ready');
    expect(await connection.ping()).toBe('PONG');
    // The attempt the close aborted decides nothing: no retry is scheduled for it,
    // and its job stays active for stalled recovery, as when the connection was ended.
    expect(await queue.bull.getJobCounts('active', 'delayed', 'failed', 'wait')).toEqual({
      active: 1,
      delayed: 0,
      failed: 0,
      wait: 0,
    });
  });
});
