import { Queue, type Job } from 'bullmq';
import { expect } from 'vitest';
import { BullWorker } from '../../src/scheduler/bullmq/bull-worker.js';
import { onCleanup } from '../harness/cleanup.js';
import { cleanQueue, connect, uniqueQueueName } from '../harness/redis.js';

/**
 * For the tests of BullMQ's internals that job-moves.ts relies on: the file's
 * connection (each test file disconnects it after its tests), a queue of a
 * test's own, and a job taken by hand with its lock token.
 */

/** The file's connection, opened on import; each test file disconnects it after its tests. */
export const admin = connect();

/** A job taken by hand (no processor), with its lock token. */
export async function takeJob(
  name: string,
): Promise<{ worker: BullWorker; job: Job; token: string }> {
  const connection = connect();
  const worker = new BullWorker(name, null, { connection, autorun: false, lockDuration: 30_000 });
  onCleanup(async () => {
    await worker.close(true);
    connection.disconnect();
  });
  const token = 'token-' + name;
  const job = (await worker.getNextJob(token)) as Job;
  expect(job).toBeDefined();
  return { worker, job, token };
}

export function setup(prefix: string) {
  const name = uniqueQueueName(prefix);
  const queue = new Queue(name, { connection: connect() });
  onCleanup(async () => {
    await queue.close();
    await cleanQueue(admin, name);
  });
  return { name, queue };
}

export function deathJson(): string {
  return JSON.stringify({ reason: 'permanent-error', message: 'm', attempts: 1, deadAt: 1234 });
}
