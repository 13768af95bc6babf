import { hostname } from 'node:os';
import { z } from 'zod';
import type { LoggerOption } from '../../src/config/logger.js';
import { parseConfig } from '../../src/config/env.js';
import type { RetryPolicyInput } from '../../src/policy/retry-policy.js';
import type { RedisLike } from '../../src/redis/connection.js';
import type { Clock, Random } from '../../src/util/system.js';
import type { BrokerHandler } from '../consumer/broker-message.js';
import type { BreakerSource } from '../consumer/breaker-watch.js';
import { retryQueueNameFor } from '../consumer/dedupe-key.js';
import { defaultMaxBodyBytes } from '../consumer/retry-worker.js';

/** The numeric and naming options of {@link createNatsConsumer}, validated in one place. */
export const natsConsumerConfigSchema = z
  .object({
    /** NATS servers, comma-separated. @defaultValue `NATS_URL`, else `nats://127.0.0.1:4222` */
    servers: z.string().min(1).optional(),
    /** The JetStream stream. */
    stream: z.string().min(1).max(255),
    /** The durable pull consumer on it (it must exist). */
    consumer: z.string().min(1).max(255),
    /** This process's name in attempt records. @defaultValue `<hostname>-<pid>` */
    worker: z.string().min(1).optional(),
    /** The requeue queue of retries and dead letters. @defaultValue `<stream>.<consumer>.retry` */
    retryQueue: z.string().min(1).optional(),
    /**
     * What a failure does. `nak`: the message goes back to the stream with
     * requeue's computed delay (`nak(delayMs)`), and JetStream redelivers it;
     * `hand-off`: it is stored in requeue's retry queue and acknowledged, as
     * AMQP's consumer does. Both dead-letter into requeue's DLQ and `term`.
     * @defaultValue `'hand-off'`
     */
    failureMode: z.enum(['nak', 'hand-off']).default('hand-off'),
    /** Handlers at once, and messages per pull. @defaultValue `1` */
    concurrency: z.int().min(1).max(10_000).default(1),
    /** Longest wait of one pull for messages, in ms. @defaultValue `1000` */
    pullExpiresMs: z.int().min(1000).default(1000),
    /** How often a running handler's message is told `working()`, in ms. @defaultValue a third of the consumer's `ack_wait` */
    workingIntervalMs: z.int().min(10).optional(),
    /** `hand-off` mode: a message delivered more often than this is handed off without a run here. @defaultValue `3` */
    maxDeliveries: z.int().min(1).default(3),
    /** A larger body is dead-lettered (`invalid-payload`) without being stored, in bytes. @defaultValue 1 MiB */
    maxBodyBytes: z.int().min(1).default(defaultMaxBodyBytes),
    /** Wait after a broker or Redis error before trying again, in ms. @defaultValue `1000` */
    errorBackoffMs: z.int().min(0).default(1000),
    /** The first connection's timeout, in ms. @defaultValue `5000` */
    connectTimeoutMs: z.int().min(1).default(5000),
  })
  .strict();

/** Options of {@link createNatsConsumer}. */
export interface NatsConsumerOptions<B = unknown> extends z.input<typeof natsConsumerConfigSchema> {
  /** Redis URL or connection for the retry queue. @defaultValue `REDIS_URL`, else `redis://127.0.0.1:6379` */
  connection?: RedisLike;
  /** Runs each message. */
  handler: BrokerHandler<B>;
  /** The retry policy: `nak` mode computes its delays; `hand-off` mode stamps it on the jobs. @defaultValue requeue's default */
  policy?: RetryPolicyInput;
  /** The body must satisfy this; a message that does not is dead-lettered with `invalid-payload`. */
  schema?: z.ZodType<B>;
  /** The retry worker whose queue-wide breaker pauses pulling while it is open. */
  breaker?: BreakerSource;
  /** Start pulling at once. @defaultValue `true` */
  autorun?: boolean;
  /** A pino logger or pino options. @defaultValue warnings and errors on stderr */
  logger?: LoggerOption;
  clock?: Clock;
  random?: Random;
}

/** The validated configuration of a JetStream consumer. */
export type NatsConsumerConfig = z.output<typeof natsConsumerConfigSchema> & {
  servers: string;
  worker: string;
  retryQueue: string;
};

/** The default retry queue of a JetStream consumer: `<stream>.<consumer>.retry`, encoded. */
export function defaultNatsRetryQueue(stream: string, consumer: string): string {
  return retryQueueNameFor([stream, consumer]);
}

/** Validates `options` (naming the bad field) and fills in the defaults that depend on others. */
export function parseNatsConsumerConfig(
  options: z.input<typeof natsConsumerConfigSchema>,
): NatsConsumerConfig {
  const parsed = parseConfig(natsConsumerConfigSchema, options, 'natsConsumer');
  return {
    ...parsed,
    servers: parsed.servers ?? process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
    worker: parsed.worker ?? `${hostname()}-${process.pid}`,
    retryQueue: parsed.retryQueue ?? defaultNatsRetryQueue(parsed.stream, parsed.consumer),
  };
}
