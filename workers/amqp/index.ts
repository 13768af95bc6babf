/**
 * Message-consumer recovery for RabbitMQ (AMQP 0-9-1, through amqplib, an
 * optional peer dependency): a consumer that hands failed messages to
 * requeue's durable schedule before acknowledging them, and the requeue
 * worker that retries them and dead-letters them with their history.
 *
 * @module requeue/amqp
 */
export { AmqpConsumer, createAmqpConsumer } from './consumer.js';
export {
  amqpConsumerConfigSchema,
  amqpRepublishTarget,
  defaultAmqpRetryQueue,
  parseAmqpConsumerConfig,
} from './consumer-config.js';
export type { AmqpConsumerConfig, AmqpConsumerOptions } from './consumer-config.js';
export { createAmqpRetryWorker } from './retry-worker.js';
export type { AmqpRetryWorkerOptions } from './retry-worker.js';
export { readAmqpMessage } from './read-message.js';
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
