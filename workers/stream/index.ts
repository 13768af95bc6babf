/**
 * Message-consumer recovery for Redis Streams: a consumer-group reader that
 * hands failed entries to requeue, and the requeue worker that retries them.
 *
 * @module requeue/stream
 */
export { createStreamConsumer, StreamConsumer } from './consumer.js';
export { streamConsumerConfigSchema } from './consumer-config.js';
export type { StreamConsumerConfig, StreamConsumerOptions } from './consumer-config.js';
export { createStreamRetryWorker } from './retry-worker.js';
export type { StreamRetryWorkerOptions } from './retry-worker.js';
export {
  captureStreamError,
  defaultRetryQueueName,
  retryIdempotencyKey,
  retryJobDataSchema,
  retryJobFor,
  retryJobName,
  reviveStreamError,
} from './retry-job.js';
export type { RetryJob, StreamAttempt, StreamError, StreamRetryJobData } from './retry-job.js';
export type { StreamConsumerEvents } from './events.js';
export type { BrokerAttempt, BrokerError } from './retry-job.js';
export type { StreamFields, StreamHandler, StreamMessage } from './message.js';
