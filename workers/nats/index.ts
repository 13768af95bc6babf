/**
 * Message-consumer recovery for NATS JetStream (through the `nats` client,
 * an optional peer dependency): a pull consumer that `nak`s with requeue's
 * computed delay or hands failures to requeue's durable schedule, `term`s
 * dead messages only after requeue's DLQ has them, and keeps long handlers
 * alive with `working()`.
 *
 * @module requeue/nats
 */
export { NatsConsumer, createNatsConsumer } from './consumer.js';
export {
  defaultNatsRetryQueue,
  natsConsumerConfigSchema,
  parseNatsConsumerConfig,
} from './consumer-config.js';
export type { NatsConsumerConfig, NatsConsumerOptions } from './consumer-config.js';
export { createNatsRetryWorker } from './retry-worker.js';
export type { NatsRetryWorkerOptions } from './retry-worker.js';
export { decideNak } from './nak-decision.js';
export { readNatsMessage } from './read-message.js';
export type {
  BrokerHandler,
  BrokerMessage,
  BrokerJobData,
  ReadMessage,
} from '../consumer/broker-message.js';
export type { MessageHeaders } from '../consumer/message-body.js';
export type { BrokerAttempt } from '../consumer/hand-off.js';
export type { BrokerConsumerEvents } from '../consumer/events.js';
export type { BrokerError } from '../consumer/broker-error.js';
export type { BrokerRetryWorkerOptions } from '../consumer/retry-worker.js';
export { republishHeaderNames } from '../consumer/republish.js';
export type { Republished } from '../consumer/broker-message.js';
export type { BreakerSource } from '../consumer/breaker-watch.js';
