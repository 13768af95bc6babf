import type { z } from 'zod';
import type { RequeueWorker, WorkerOptions } from '../../src/scheduler/requeue-worker.js';
import {
  brokerJobDataSchema,
  messageFromJob,
  type BrokerHandler,
  type BrokerJobData,
} from './broker-message.js';
import { createHandOffWorker } from './hand-off.js';

/** The default largest body a broker consumer stores in a hand-off job: 1 MiB. */
export const defaultMaxBodyBytes = 1024 * 1024;

/** Options of the broker retry workers (`createAmqpRetryWorker`, `createNatsRetryWorker`): a requeue worker's, plus the handler's. */
export interface BrokerRetryWorkerOptions<B = unknown> extends Omit<
  WorkerOptions<BrokerJobData>,
  'schema'
> {
  /** The same handler as the broker consumer's. */
  handler: BrokerHandler<B>;
  /** The body must satisfy this; others are dead-lettered with `invalid-payload`. */
  schema?: z.ZodType<B>;
  /** As the consumer's. @defaultValue 1 MiB */
  maxBodyBytes?: number;
}

/**
 * A requeue worker on a broker consumer's retry queue (AMQP or JetStream):
 * the first run of each job replays the broker attempt's error, so requeue
 * records it as attempt 1 and schedules attempt 2 — or dead-letters the
 * message with its history; later runs call the handler with `attempt` 2, 3, ….
 */
export function createBrokerRetryWorker<B = unknown>(
  retryQueue: string,
  options: BrokerRetryWorkerOptions<B>,
): RequeueWorker<BrokerJobData, void> {
  const { handler, schema, maxBodyBytes = defaultMaxBodyBytes, ...workerOptions } = options;
  return createHandOffWorker<BrokerJobData>(retryQueue, {
    ...workerOptions,
    schema: brokerJobDataSchema,
    attemptOf: (data) => data.brokerAttempt,
    phase: 'broker',
    run: async (job) =>
      handler(
        messageFromJob(
          job.data,
          { attempt: job.attempt, signal: job.signal },
          {
            maxBodyBytes,
            schema,
          },
        ),
      ),
  });
}
