import { z } from 'zod';
import {
  createWorker,
  type RequeueJob,
  type RequeueWorker,
  type WorkerOptions,
} from '../../src/scheduler/requeue-worker.js';
import type { StreamFields, StreamHandler, StreamMessage } from './message.js';
import {
  defaultRetryQueueName,
  retryJobDataSchema,
  reviveStreamError,
  type StreamRetryJobData,
} from './retry-job.js';

/** Options of {@link createStreamRetryWorker}: a requeue worker's, plus the stream's. */
export interface StreamRetryWorkerOptions<F = StreamFields> extends Omit<
  WorkerOptions<StreamRetryJobData<F>>,
  'schema'
> {
  /** The stream whose messages this worker retries. */
  stream: string;
  /** The consumer group. */
  group: string;
  /** The retry queue. @defaultValue `<stream>.<group>.retry`, as the consumer's */
  retryQueue?: string;
  /** The same handler as the stream consumer's. */
  handler: StreamHandler<F>;
  /** The fields must satisfy this; others are dead-lettered with `invalid-payload`. */
  schema?: z.ZodType<F>;
}

/**
 * A requeue worker on a stream group's retry queue. Each job is a message
 * whose stream attempt failed (the entry is already acknowledged):
 *
 * - Its first run replays the stream attempt's error without calling the
 *   handler, so that requeue records it as attempt 1 and decides what comes
 *   next — a retry after the policy's first delay, or the DLQ for a
 *   permanent error or an exhausted policy.
 * - Later runs call the handler with `attempt` 2, 3, …; a success ends the
 *   message, a failure goes through requeue's retries and DLQ as any job's.
 *
 * A dead message's DLQ record keeps the stream id in `data.id` and in
 * `opts.rq.tags.streamId`.
 */
export function createStreamRetryWorker<F = StreamFields>(
  options: StreamRetryWorkerOptions<F>,
): RequeueWorker<StreamRetryJobData<F>, void> {
  const { stream, group, retryQueue, handler, schema, ...workerOptions } = options;
  const name = retryQueue ?? defaultRetryQueueName(stream, group);
  const fields = schema ?? (z.record(z.string(), z.string()) as unknown as z.ZodType<F>);
  return createWorker<StreamRetryJobData<F>, void>(name, (job) => runRetry(job, handler), {
    ...workerOptions,
    schema: retryJobDataSchema(fields),
  });
}

async function runRetry<F>(
  job: RequeueJob<StreamRetryJobData<F>>,
  handler: StreamHandler<F>,
): Promise<void> {
  const { stream, group, id, fields, streamAttempt } = job.data;
  if (job.attempt === 1 && job.history.length === 0) {
    // The stream consumer already ran this attempt: requeue classifies its error now.
    job.annotate({
      phase: 'stream',
      consumer: streamAttempt.consumer,
      deliveries: streamAttempt.deliveries,
      failedAt: streamAttempt.failedAt,
    });
    throw reviveStreamError(streamAttempt.error);
  }
  const message: StreamMessage<F> = Object.freeze({
    stream,
    group,
    id,
    fields,
    attempt: job.attempt,
    deliveries: streamAttempt.deliveries,
    signal: job.signal,
  });
  await handler(message);
}
