import { hostname } from 'node:os';
import { z } from 'zod';
import type { LoggerOption } from '../../src/config/logger.js';
import { parseConfig } from '../../src/config/env.js';
import type { RetryPolicyInput } from '../../src/policy/retry-policy.js';
import type { RedisLike } from '../../src/redis/connection.js';
import type { Clock } from '../../src/util/system.js';
import type { BrokerHandler } from '../consumer/broker-message.js';
import type { BreakerSource } from '../consumer/breaker-watch.js';
import { retryQueueNameFor } from '../consumer/dedupe-key.js';
import { defaultMaxBodyBytes } from '../consumer/retry-worker.js';

/** The numeric and naming options of {@link createAmqpConsumer}, validated in one place. */
export const amqpConsumerConfigSchema = z
  .object({
    /** The broker, e.g. `amqp://guest:guest@127.0.0.1:5672`. @defaultValue `AMQP_URL`, else `amqp://127.0.0.1:5672` */
    url: z.string().min(1).optional(),
    /** The queue to consume (it must exist: classic or quorum). */
    queue: z.string().min(1).max(255),
    /** @defaultValue `<hostname>-<pid>` */
    consumer: z.string().min(1).optional(),
    /** The requeue queue holding this queue's retries and dead letters. @defaultValue `<queue>.retry` (see `retryQueueNameFor`) */
    retryQueue: z.string().min(1).optional(),
    /** Handlers at once, and the channel's prefetch. @defaultValue `1` */
    concurrency: z.int().min(1).max(65_535).default(1),
    /**
     * A message a quorum queue has delivered more often than this
     * (`x-delivery-count`: its consumers kept dying on it) is handed off
     * without running the handler here. @defaultValue `3`
     */
    maxDeliveries: z.int().min(1).default(3),
    /** A larger body is dead-lettered (`invalid-payload`) without being stored, in bytes. @defaultValue 1 MiB */
    maxBodyBytes: z.int().min(1).default(defaultMaxBodyBytes),
    /** Wait after a broker or Redis error before trying again, in ms. @defaultValue `1000` */
    errorBackoffMs: z.int().min(0).default(1000),
    /** The connection's name on the broker (`rabbitmqctl list_connections client_properties`). @defaultValue `requeue <consumer>` */
    connectionName: z.string().min(1).max(255).optional(),
    /** The first connection's timeout, in ms. @defaultValue `5000` */
    connectTimeoutMs: z.int().min(1).default(5000),
  })
  .strict();

/** Options of {@link createAmqpConsumer}. */
export interface AmqpConsumerOptions<B = unknown> extends z.input<typeof amqpConsumerConfigSchema> {
  /** Redis URL or connection for the retry queue. @defaultValue `REDIS_URL`, else `redis://127.0.0.1:6379` */
  connection?: RedisLike;
  /** Runs each message. */
  handler: BrokerHandler<B>;
  /** The retry policy stamped on every hand-off job. @defaultValue the retry worker's */
  policy?: RetryPolicyInput;
  /** The body must satisfy this; a message that does not is dead-lettered with `invalid-payload`. */
  schema?: z.ZodType<B>;
  /**
   * The retry worker whose queue-wide breaker this consumer follows: while it
   * is open, the consumer cancels its subscription (basic.cancel) and takes
   * no deliveries; the ones not started go back to the queue unharmed.
   */
  breaker?: BreakerSource;
  /** Start consuming at once. @defaultValue `true` */
  autorun?: boolean;
  /** A pino logger or pino options. @defaultValue warnings and errors on stderr */
  logger?: LoggerOption;
  clock?: Clock;
}

/** The validated configuration of an AMQP consumer. */
export type AmqpConsumerConfig = z.output<typeof amqpConsumerConfigSchema> & {
  url: string;
  consumer: string;
  retryQueue: string;
};

/** The default retry queue of an AMQP queue: `<queue>.retry`, encoded. */
export function defaultAmqpRetryQueue(queue: string): string {
  return retryQueueNameFor([queue]);
}

/** Validates `options` (naming the bad field) and fills in the defaults that depend on others. */
export function parseAmqpConsumerConfig(
  options: z.input<typeof amqpConsumerConfigSchema>,
): AmqpConsumerConfig {
  const parsed = parseConfig(amqpConsumerConfigSchema, options, 'amqpConsumer');
  return {
    ...parsed,
    url: parsed.url ?? process.env.AMQP_URL ?? 'amqp://127.0.0.1:5672',
    consumer: parsed.consumer ?? `${hostname()}-${process.pid}`,
    retryQueue: parsed.retryQueue ?? defaultAmqpRetryQueue(parsed.queue),
  };
}

/**
 * The `republish` option of `createAmqpRetryWorker` from a CLI flag or an
 * environment variable: `exchange` `amq.default` (RabbitMQ's name for it) or
 * none is the default exchange `''`, which routes straight to the queue
 * named by the routing key (default: the source queue).
 */
export function amqpRepublishTarget(
  url: string,
  exchange: string | undefined,
  routingKey: string | undefined,
): { url: string; exchange: string; routingKey?: string } {
  return {
    url,
    exchange: exchange === undefined || exchange === 'amq.default' ? '' : exchange,
    ...(routingKey !== undefined && { routingKey }),
  };
}
