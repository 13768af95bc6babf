import { hostname } from 'node:os';
import { z } from 'zod';
import type { LoggerOption } from '../../src/config/logger.js';
import { parseConfig } from '../../src/config/env.js';
import type { RetryPolicyInput } from '../../src/policy/retry-policy.js';
import type { RedisLike } from '../../src/redis/connection.js';
import type { Clock } from '../../src/util/system.js';
import type { StreamFields, StreamHandler } from './message.js';
import { defaultRetryQueueName } from './retry-job.js';

/** The numeric and naming options of {@link createStreamConsumer}, validated in one place. */
export const streamConsumerConfigSchema = z
  .object({
    stream: z.string().min(1),
    group: z.string().min(1),
    /** @defaultValue `<hostname>-<pid>` */
    consumer: z.string().min(1).optional(),
    /** @defaultValue `<stream>.<group>.retry` (see `defaultRetryQueueName`) */
    retryQueue: z.string().min(1).optional(),
    /** Where a group created by the consumer starts reading. @defaultValue `'$'` (new entries only) */
    startId: z.string().min(1).default('$'),
    /** Entries per XREADGROUP / XAUTOCLAIM (COUNT). @defaultValue `32` */
    batchSize: z.int().min(1).default(32),
    /** Handlers run at once within a batch. @defaultValue `1` */
    concurrency: z.int().min(1).default(1),
    /** Longest wait of one XREADGROUP for new entries, in ms. @defaultValue `1000` */
    blockMs: z.int().min(1).default(1000),
    /** An entry pending this long without its consumer touching it is reclaimed, in ms. @defaultValue `30_000` */
    claimIdleMs: z.int().min(1).default(30_000),
    /** How often idle entries are looked for, in ms. @defaultValue `claimIdleMs / 2` */
    claimIntervalMs: z.int().min(1).optional(),
    /**
     * An entry delivered more often than this (its consumers kept dying on it)
     * is handed to the retry queue without running the handler in the stream
     * consumer. @defaultValue `3`
     */
    maxDeliveries: z.int().min(1).default(3),
    /** Wait after a Redis error before trying again, in ms. @defaultValue `1000` */
    errorBackoffMs: z.int().min(0).default(1000),
  })
  .strict();

/** Options of {@link createStreamConsumer}. */
export interface StreamConsumerOptions<F = StreamFields> extends z.input<
  typeof streamConsumerConfigSchema
> {
  /** Redis URL or connection (one Redis or a Cluster). @defaultValue `REDIS_URL` (a Cluster seed with `REDIS_CLUSTER=1`), else `redis://127.0.0.1:6379` */
  connection?: RedisLike;
  /** Runs each entry. */
  handler: StreamHandler<F>;
  /**
   * The retry policy stamped on every retry job, so the retry worker honours
   * it whichever process runs it. @defaultValue the retry worker's
   */
  policy?: RetryPolicyInput;
  /**
   * The fields must satisfy this. An entry that does not is handed off
   * without running the handler, and the retry worker (given the same
   * schema) dead-letters it with `invalid-payload`.
   */
  schema?: z.ZodType<F>;
  /** Start reading at once. @defaultValue `true` */
  autorun?: boolean;
  /** A pino logger or pino options. @defaultValue warnings and errors on stderr */
  logger?: LoggerOption;
  clock?: Clock;
}

/** The validated configuration of a consumer. */
export type StreamConsumerConfig = z.output<typeof streamConsumerConfigSchema> & {
  consumer: string;
  retryQueue: string;
  claimIntervalMs: number;
};

/** Validates `options` (naming the bad field) and fills in the defaults that depend on others. */
export function parseStreamConsumerConfig(
  options: z.input<typeof streamConsumerConfigSchema>,
): StreamConsumerConfig {
  const parsed = parseConfig(streamConsumerConfigSchema, options, 'streamConsumer');
  return {
    ...parsed,
    consumer: parsed.consumer ?? `${hostname()}-${process.pid}`,
    retryQueue: parsed.retryQueue ?? defaultRetryQueueName(parsed.stream, parsed.group),
    claimIntervalMs: parsed.claimIntervalMs ?? Math.max(1, Math.round(parsed.claimIdleMs / 2)),
  };
}
