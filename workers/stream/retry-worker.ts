import { z } from 'zod';
import type {
  RequeueJob,
  RequeueWorker,
  WorkerOptions,
} from '../../src/scheduler/requeue-worker.js';
import { createHandOffWorker } from '../consumer/hand-off.js';
import type { StreamFields, StreamHandler, StreamMessage } from './message.js';
import { defaultRetryQueueName, retryJobDataSchema, type StreamRetryJobData } from './retry-job.js';

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
  return createHandOffWorker<StreamRetryJobData<F>>(name, {
    ...workerOptions,
    schema: retryJobDataSchema(fields),
    attemptOf: (data) => data.streamAttempt,
    phase: 'stream',
    run: (job) => runRetry(job, handler),
  });
}

async function runRetry<F>(
  job: RequeueJob<StreamRetryJobData<F>>,
  handler: StreamHandler<F>,
): Promise<void> {
  const { stream, group, id, fields, streamAttempt } = job.data;
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
