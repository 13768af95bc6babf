import type { z } from 'zod';
import { PermanentError } from '../../src/errors/permanent-error.js';
import type { RequeueJob } from '../../src/scheduler/attempt/context.js';
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

/** Publishes a due retry back to the broker; resolves once the broker confirmed it. */
export type RepublishRetry = (job: RequeueJob<BrokerJobData>) => Promise<void>;

/**
 * A requeue worker on a broker consumer's retry queue (AMQP or JetStream):
 * the first run of each job replays the broker attempt's error, so requeue
 * records it as attempt 1 and schedules attempt 2 — or dead-letters the
 * message with its history; later runs call the handler with `attempt` 2, 3, …
 * — or, with `republish`, publish the message back to the broker (the job
 * completes once the broker confirmed it; the consumer runs it).
 */
export function createBrokerRetryWorker<B = unknown>(
  retryQueue: string,
  options: BrokerRetryWorkerOptions<B>,
  republish?: RepublishRetry,
): RequeueWorker<BrokerJobData, void> {
  const { handler, schema, maxBodyBytes = defaultMaxBodyBytes, ...workerOptions } = options;
  return createHandOffWorker<BrokerJobData>(retryQueue, {
    ...workerOptions,
    schema: brokerJobDataSchema,
    attemptOf: (data) => data.brokerAttempt,
    phase: 'broker',
    run: async (job) => {
      if (!republish) return runHere(job);
      if (job.data.bodyBytes !== undefined) {
        throw new PermanentError(`body of ${job.data.bodyBytes} bytes was not stored`, {
          deadReason: 'invalid-payload',
        });
      }
      return republish(job);
    },
  });

  function runHere(job: RequeueJob<BrokerJobData>): Promise<void> {
    return handler(
      messageFromJob(
        job.data,
        { attempt: job.attempt, signal: job.signal },
        {
          maxBodyBytes,
          schema,
        },
      ),
    );
  }
}
