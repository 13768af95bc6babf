/**
 * A broker-consumer process (`requeue/amqp` or `requeue/nats`): consumes
 * AMQP_QUEUE on AMQP_URL, or the durable NATS_CONSUMER of NATS_STREAM on
 * NATS_SERVERS, runs the HANDLER module's default export per message, and runs
 * the retry worker of the source's retry queue beside it. SIGTERM or SIGINT
 * drains both within SHUTDOWN_TIMEOUT_MS.
 *
 *   BROKER=amqp AMQP_URL=amqp://… AMQP_QUEUE=orders HANDLER=./handler.js \
 *     node --import tsx workers/consumer/main.ts
 *   BROKER=nats NATS_SERVERS=nats://… NATS_STREAM=ORDERS NATS_CONSUMER=billing HANDLER=./handler.js \
 *     node --import tsx workers/consumer/main.ts
 *
 * The handler module may also export a zod `schema` for the body.
 * `METRICS_PORT` (and `METRICS_HOST`, default `127.0.0.1`) serves Prometheus
 * metrics of the retry worker at `/metrics`.
 */
import { z } from 'zod';
import { ConfigError, envSchema, envValue, parseConfig, presentEnv } from '../../src/config/env.js';
import { createLogger } from '../../src/config/logger.js';
import { reportStartFailure } from '../../src/config/start-failure.js';
import { limits } from '../../src/policy/limits.js';
import { checkQueueSet } from '../../src/policy/queue-name.js';
import { parseRetryPolicy } from '../../src/policy/retry-policy.js';
import { checkRedis } from '../../src/redis/check-redis.js';
import { defaultRedisUrl } from '../../src/redis/connection.js';
import { metricsEnvShape, serveMetrics } from '../../src/scheduler/metrics-server.js';
import type { RequeueWorker } from '../../src/scheduler/requeue-worker.js';
import { loadHandlerModule } from '../../src/util/load-module.js';
import { closeOnSignal } from '../../src/util/signals.js';
import {
  amqpRepublishTarget,
  createAmqpConsumer,
  createAmqpRetryWorker,
  defaultAmqpRetryQueue,
} from '../amqp/index.js';
import { createNatsConsumer, createNatsRetryWorker, defaultNatsRetryQueue } from '../nats/index.js';
import type { BrokerHandler } from './broker-message.js';

/** The environment this process reads. */
export const consumerEnvSchema = envSchema.extend({
  /** Which broker: `amqp` (RabbitMQ) or `nats` (JetStream). */
  BROKER: z.enum(['amqp', 'nats']),
  /** amqp: the broker's URL, e.g. `amqp://guest:guest@127.0.0.1:5672`. */
  AMQP_URL: z.string().min(1).optional(),
  /** amqp: the queue to consume (it must exist). */
  AMQP_QUEUE: z.string().min(1).optional(),
  /** nats: the servers, comma-separated. */
  NATS_SERVERS: z.string().min(1).optional(),
  /** nats: the stream. */
  NATS_STREAM: z.string().min(1).optional(),
  /** nats: the durable pull consumer (it must exist). */
  NATS_CONSUMER: z.string().min(1).optional(),
  /** nats: `hand-off` (requeue's retry queue) or `nak` (a delayed nak). @defaultValue `hand-off` */
  NATS_FAILURE_MODE: z.enum(['hand-off', 'nak']).default('hand-off'),
  /** Publish due retries (and DLQ replays) back to the broker instead of running them here. @defaultValue `false`, `true` when a `*_REPUBLISH_*` variable is set */
  REPUBLISH: envValue.boolean().optional(),
  /** amqp: republish to this exchange (`amq.default`: the default exchange, straight to a queue). @defaultValue the default exchange */
  AMQP_REPUBLISH_EXCHANGE: z.string().min(1).max(255).optional(),
  /** amqp: the republish routing key. @defaultValue the source queue */
  AMQP_REPUBLISH_ROUTING_KEY: z.string().min(1).max(255).optional(),
  /** nats: republish to this subject. @defaultValue the message's own subject */
  NATS_REPUBLISH_SUBJECT: z.string().min(1).max(1024).optional(),
  /** Path of a module whose default export is `async (message) => void`. */
  HANDLER: z.string().min(1),
  /** @defaultValue `amqp.<queue>.retry` / `nats.<stream>.<consumer>.retry` */
  RETRY_QUEUE: z.string().min(1).optional(),
  /** Retry policy as JSON, e.g. `{"strategy":"full-jitter","baseMs":500}`. */
  POLICY: z.string().optional(),
  /** Handlers at once (and the prefetch / pull size). @defaultValue `1` */
  CONCURRENCY: envValue.integer(1, limits.concurrency).default(1),
  /** On SIGTERM, wait this long for running handlers. @defaultValue `30000` */
  SHUTDOWN_TIMEOUT_MS: envValue.integer(0, limits.timeoutMs).default(30_000),
  ...metricsEnvShape,
});

type ConsumerEnv = z.infer<typeof consumerEnvSchema>;

function required(env: ConsumerEnv, name: keyof ConsumerEnv): string {
  const value = env[name];
  if (typeof value !== 'string')
    throw new ConfigError(`env.${name}: required with BROKER=${env.BROKER}`);
  return value;
}

function parsePolicy(json: string | undefined) {
  if (json === undefined) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    throw new ConfigError('env.POLICY: not valid JSON');
  }
  return parseRetryPolicy(value, 'env.POLICY');
}

async function main(): Promise<void> {
  const env = parseConfig(consumerEnvSchema, presentEnv(process.env), 'env');
  const policy = parsePolicy(env.POLICY);
  const amqp = env.BROKER === 'amqp';
  const source = amqp
    ? { url: required(env, 'AMQP_URL'), queue: required(env, 'AMQP_QUEUE') }
    : {
        servers: required(env, 'NATS_SERVERS'),
        stream: required(env, 'NATS_STREAM'),
        consumer: required(env, 'NATS_CONSUMER'),
      };
  const derived = amqp
    ? defaultAmqpRetryQueue(source.queue!)
    : defaultNatsRetryQueue(source.stream!, source.consumer!);
  const retryQueue = env.RETRY_QUEUE ?? derived;
  checkQueueSet([
    { label: env.RETRY_QUEUE ? 'env.RETRY_QUEUE' : 'env.RETRY_QUEUE (derived)', name: retryQueue },
  ]);
  const logger = createLogger({ level: env.LOG_LEVEL, name: `requeue-${env.BROKER}` });
  const { handler, exports } = await loadHandlerModule<BrokerHandler<unknown>>(
    env.HANDLER,
    'env.HANDLER',
  );
  const schema = exports.schema instanceof z.ZodType ? exports.schema : undefined;
  const redisUrl = env.REDIS_URL ?? defaultRedisUrl;
  await checkRedis(redisUrl, 'env.REDIS_URL');
  const common = {
    retryQueue,
    handler,
    connection: redisUrl,
    logger,
    ...(schema && { schema }),
    // The worker's too: it counts a republished chain against its maxAttempts.
    ...(policy && { policy }),
  };
  const consumerCommon = {
    ...common,
    concurrency: env.CONCURRENCY,
    autorun: false,
  };
  const republish =
    env.REPUBLISH ??
    (env.AMQP_REPUBLISH_EXCHANGE ??
      env.AMQP_REPUBLISH_ROUTING_KEY ??
      env.NATS_REPUBLISH_SUBJECT) !== undefined;
  const worker = amqp
    ? createAmqpRetryWorker({
        ...common,
        queue: source.queue!,
        ...(republish && {
          republish: amqpRepublishTarget(
            source.url!,
            env.AMQP_REPUBLISH_EXCHANGE,
            env.AMQP_REPUBLISH_ROUTING_KEY,
          ),
        }),
      })
    : createNatsRetryWorker({
        ...common,
        stream: source.stream!,
        consumer: source.consumer!,
        ...(republish && {
          republish: {
            servers: source.servers!,
            ...(env.NATS_REPUBLISH_SUBJECT !== undefined && {
              subject: env.NATS_REPUBLISH_SUBJECT,
            }),
          },
        }),
      });
  const consumer = amqp
    ? createAmqpConsumer({
        ...consumerCommon,
        url: source.url!,
        queue: source.queue!,
        breaker: worker,
      })
    : createNatsConsumer({
        ...consumerCommon,
        servers: source.servers!,
        stream: source.stream!,
        consumer: source.consumer!,
        failureMode: env.NATS_FAILURE_MODE,
        breaker: worker,
      });
  try {
    await consumer.waitUntilReady();
  } catch (err) {
    await Promise.allSettled([
      consumer.close({ timeoutMs: 1000 }),
      worker.close({ timeoutMs: 1000 }),
    ]);
    // One line naming the broker (its URL without credentials), exit code 2.
    throw new ConfigError(String((err as Error).message));
  }
  const metrics =
    env.METRICS_PORT === undefined
      ? undefined
      : await serveMetrics({
          connection: redisUrl,
          port: env.METRICS_PORT,
          host: env.METRICS_HOST,
          label: 'env.METRICS_PORT',
          logger,
        });
  metrics?.watch(worker as unknown as RequeueWorker<unknown, unknown>);
  await worker.waitUntilReady();
  logger.info({ broker: env.BROKER, retryQueue, concurrency: env.CONCURRENCY }, 'consumer started');

  await closeOnSignal({
    timeoutMs: env.SHUTDOWN_TIMEOUT_MS,
    // The consumer first (its hand-offs need the retry queue), then the retry worker with what is left.
    close: async (budget) => {
      await consumer.close({ timeoutMs: Math.floor(budget.left() * 0.6) });
      await Promise.all([
        worker.close({ timeoutMs: budget.left() }),
        metrics?.close(Math.min(budget.left(), 5_000)),
      ]);
    },
    logger,
    leftBehind:
      'unacked messages go back to the broker and active retry jobs are left to stalled recovery',
  });
}

main().catch((err: unknown) => reportStartFailure('requeue-consumer', err));
