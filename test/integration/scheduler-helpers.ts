import { createLogger } from '../../src/config/logger.js';
import { DeadLetterQueue, type DeadJobRecord } from '../../src/scheduler/dlq/dead-letter-queue.js';
import { parseJobState, type AttemptRecord } from '../../src/policy/job-state.js';
import { createQueue, type RequeueQueue } from '../../src/scheduler/queue.js';
import {
  createWorker,
  type Handler,
  type RequeueWorker,
  type WorkerOptions,
} from '../../src/scheduler/requeue-worker.js';
import { cleanQueue, connect, jobKey, redisUrl, uniqueQueueName } from '../harness/redis.js';
import { onCleanup } from '../harness/cleanup.js';
import { WorkerEventLog } from '../harness/worker-events.js';

/**
 * Shared by the scheduler's integration tests: timing slack, a connection the
 * test files disconnect after their tests, a queue and worker of a test's own,
 * an HTTP-shaped error and a dead record to seed.
 */

/**
 * Clock skew allowed between the worker's clock (which stamps the history)
 * and the time BullMQ promotes a delayed job: both read this machine's clock,
 * but BullMQ rounds the delay to whole milliseconds.
 */
export const SKEW_MS = 5;
/** How late an attempt may start after its due time on a loaded test machine. */
export const SCHEDULING_SLACK_MS = 2_000;
export const DAY_MS = 24 * 3600 * 1000;

const logger = createLogger({ level: 'silent' });
/** The file's connection, opened on import; each test file disconnects it after its tests. */
export const admin = connect();

/** An error as an HTTP client throws it. */
export function httpError(status: number, headers?: Record<string, string>): Error {
  return Object.assign(new Error(`HTTP ${status}`), { status, ...(headers ? { headers } : {}) });
}

/** A queue of its own for one test, removed with everything in it afterwards. */
export function setup(prefix: string) {
  const name = uniqueQueueName(prefix);
  const queue: RequeueQueue<unknown> = createQueue(name, { connection: redisUrl() });
  const dlq = new DeadLetterQueue(name, { connection: redisUrl() });
  onCleanup(async () => {
    await dlq.close();
    await queue.close();
    await cleanQueue(admin, name);
  });

  function startWorker<T = unknown>(
    handler: Handler<T, unknown>,
    options: WorkerOptions<T> = {},
  ): { worker: RequeueWorker<T, unknown>; events: WorkerEventLog } {
    const worker = createWorker<T, unknown>(name, handler, {
      connection: redisUrl(),
      logger,
      ...options,
    });
    const events = new WorkerEventLog(worker);
    onCleanup(() => worker.close({ timeoutMs: 5_000 }));
    return { worker, events };
  }

  /** The attempt history stored in the job hash's `rq` field. */
  async function storedHistory(id: string): Promise<AttemptRecord[]> {
    const state = parseJobState(await admin.hget(jobKey(admin, name, id), 'rq'));
    if (!state) throw new Error(`job ${id} of ${name} has no stored state`);
    return state.history;
  }

  /** When BullMQ last moved the job to active: the start of its last attempt. */
  async function lastStartedAt(id: string): Promise<number> {
    const job = await queue.bull.getJob(id);
    if (!job?.processedOn) throw new Error(`job ${id} of ${name} has not been processed`);
    return job.processedOn;
  }

  return { name, queue, dlq, startWorker, storedHistory, lastStartedAt };
}

/** A dead record as the worker would store it, for the DLQ's own operations. */
export function deadRecord(
  source: string,
  id: string,
  extra: Partial<DeadJobRecord> = {},
): Omit<DeadJobRecord, 'gen'> {
  const deadAt = extra.deadAt ?? Date.now();
  return {
    source,
    id,
    name: 'job',
    data: { id },
    opts: {},
    reason: 'permanent-error',
    message: 'HTTP 400',
    attempts: 1,
    history: [
      {
        attempt: 1,
        replay: 0,
        startedAt: deadAt - 5,
        finishedAt: deadAt,
        outcome: 'failed',
        decision: 'dead-letter',
        deadReason: 'permanent-error',
      },
    ],
    deadAt,
    replays: 0,
    ...extra,
  };
}
