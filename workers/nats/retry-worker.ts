import type { RequeueWorker } from '../../src/scheduler/requeue-worker.js';
import type { BrokerJobData } from '../consumer/broker-message.js';
import {
  createBrokerRetryWorker,
  type BrokerRetryWorkerOptions,
} from '../consumer/retry-worker.js';
import { defaultNatsRetryQueue } from './consumer-config.js';

/** Options of {@link createNatsRetryWorker}. */
export interface NatsRetryWorkerOptions<B = unknown> extends BrokerRetryWorkerOptions<B> {
  /** The JetStream stream. */
  stream: string;
  /** The durable consumer. */
  consumer: string;
  /** The retry queue. @defaultValue `<stream>.<consumer>.retry`, as the consumer's */
  retryQueue?: string;
}

/**
 * A requeue worker on a JetStream consumer's retry queue: the first run of
 * each job replays the JetStream attempt's error (or, in `nak` mode, the
 * death the consumer already decided), later runs call the handler. Needed
 * in both failure modes: in `nak` mode it moves the dead messages into the DLQ.
 */
export function createNatsRetryWorker<B = unknown>(
  options: NatsRetryWorkerOptions<B>,
): RequeueWorker<BrokerJobData, void> {
  const { stream, consumer, retryQueue, ...rest } = options;
  return createBrokerRetryWorker<B>(retryQueue ?? defaultNatsRetryQueue(stream, consumer), rest);
}
