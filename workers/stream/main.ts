/**
 * A stream-consumer process: reads STREAM through GROUP, runs the HANDLER
 * module's default export per entry, and runs the retry worker of the
 * group's retry queue beside it. SIGTERM or SIGINT drains both.
 *
 *   REDIS_URL=redis://… STREAM=orders GROUP=billing HANDLER=./handler.js \
 *     node --import tsx workers/stream/main.ts
 *
 * The handler module may also export a zod `schema` for the fields.
 * `METRICS_PORT` (and `METRICS_HOST`, default `127.0.0.1`) serves Prometheus
 * metrics of the retry worker at `/metrics`.
 */
import { z } from 'zod';
import { ConfigError, envSchema, envValue, parseConfig, presentEnv } from '../../src/config/env.js';
import { createLogger } from '../../src/config/logger.js';
import { reportStartFailure } from '../../src/config/start-failure.js';
import { parseRetryPolicy } from '../../src/policy/retry-policy.js';
import { limits } from '../../src/policy/limits.js';
import { checkQueueSet } from '../../src/policy/queue-name.js';
import { checkRedis } from '../../src/redis/check-redis.js';
import { connectRedis, defaultRedisUrl } from '../../src/redis/connection.js';
import { metricsEnvShape, serveMetrics } from '../../src/scheduler/metrics-server.js';
import type { RequeueWorker } from '../../src/scheduler/requeue-worker.js';
import { loadHandlerModule } from '../../src/util/load-module.js';
import { closeOnSignal } from '../../src/util/signals.js';
import { createStreamConsumer } from './consumer.js';
import type { StreamHandler } from './message.js';
import { defaultRetryQueueName } from './retry-job.js';
import { createStreamRetryWorker } from './retry-worker.js';

/** The environment this process reads. */
export const streamEnvSchema = envSchema.extend({
  STREAM: z.string().min(1),
  GROUP: z.string().min(1),
  /** Path of a module whose default export is `async (message) => void`. */
  HANDLER: z.string().min(1),
  /** @defaultValue `<hostname>-<pid>` */
  CONSUMER: z.string().min(1).optional(),
  /** @defaultValue `<stream>.<group>.retry` */
  RETRY_QUEUE: z.string().min(1).optional(),
  /** Retry policy as JSON, e.g. `{"strategy":"full-jitter","baseMs":500}`. */
  POLICY: z.string().optional(),
  /** @defaultValue `'$'` */
  START_ID: z.string().min(1).optional(),
  BATCH_SIZE: envValue.integer(1, 10_000).optional(),
  CONCURRENCY: envValue.integer(1, limits.concurrency).optional(),
  RETRY_CONCURRENCY: envValue.integer(1, limits.concurrency).optional(),
  CLAIM_IDLE_MS: envValue.integer(1, limits.timeoutMs).optional(),
  BLOCK_MS: envValue.integer(1, limits.timeoutMs).optional(),
  /** On SIGTERM, wait this long for running handlers. @defaultValue `30000` */
  SHUTDOWN_TIMEOUT_MS: envValue.integer(0, limits.timeoutMs).default(30_000),
  ...metricsEnvShape,
});

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
  const env = parseConfig(streamEnvSchema, presentEnv(process.env), 'env');
  const policy = parsePolicy(env.POLICY);
  // The retry queue is a requeue queue: its name (given, or made from the stream's) must be one.
  checkQueueSet([
    {
      label: env.RETRY_QUEUE
        ? 'env.RETRY_QUEUE'
        : 'env.RETRY_QUEUE (default <stream>.<group>.retry)',
      name: env.RETRY_QUEUE ?? defaultRetryQueueName(env.STREAM, env.GROUP),
    },
  ]);
  const logger = createLogger({ level: env.LOG_LEVEL, name: 'requeue-stream' });
  const { handler, exports } = await loadHandlerModule<StreamHandler<unknown>>(
    env.HANDLER,
    'env.HANDLER',
  );
  // The module may also export a zod `schema` for the fields.
  const schema = exports.schema instanceof z.ZodType ? exports.schema : undefined;
  await checkRedis(env.REDIS_URL ?? defaultRedisUrl, 'env.REDIS_URL');
  // A Cluster when REDIS_CLUSTER says so, REDIS_URL naming a seed node.
  const redis = connectRedis(env.REDIS_URL);
  const metrics =
    env.METRICS_PORT === undefined
      ? undefined
      : await serveMetrics({
          connection: redis,
          port: env.METRICS_PORT,
          host: env.METRICS_HOST,
          label: 'env.METRICS_PORT',
          logger,
        });

  const consumer = createStreamConsumer({
    connection: redis,
    stream: env.STREAM,
    group: env.GROUP,
    handler,
    logger,
    ...(schema && { schema }),
    ...(policy && { policy }),
    ...(env.CONSUMER && { consumer: env.CONSUMER }),
    ...(env.RETRY_QUEUE && { retryQueue: env.RETRY_QUEUE }),
    ...(env.START_ID && { startId: env.START_ID }),
    ...(env.BATCH_SIZE && { batchSize: env.BATCH_SIZE }),
    ...(env.CONCURRENCY && { concurrency: env.CONCURRENCY }),
    ...(env.CLAIM_IDLE_MS && { claimIdleMs: env.CLAIM_IDLE_MS }),
    ...(env.BLOCK_MS && { blockMs: env.BLOCK_MS }),
  });
  const worker = createStreamRetryWorker({
    connection: redis,
    stream: env.STREAM,
    group: env.GROUP,
    retryQueue: consumer.config.retryQueue,
    handler,
    logger,
    ...(schema && { schema }),
    ...(policy && { policy }),
    ...(env.RETRY_CONCURRENCY && { concurrency: env.RETRY_CONCURRENCY }),
  });
  metrics?.watch(worker as unknown as RequeueWorker<unknown, unknown>);
  await Promise.all([consumer.waitUntilReady(), worker.waitUntilReady()]);
  logger.info(
    {
      stream: env.STREAM,
      group: env.GROUP,
      consumer: consumer.config.consumer,
      retryQueue: consumer.config.retryQueue,
    },
    'stream consumer started',
  );

  await closeOnSignal({
    timeoutMs: env.SHUTDOWN_TIMEOUT_MS,
    // Side by side, each with what is left: the consumer's hand-offs need the retry queue,
    // not the retry worker, which only stops taking jobs.
    close: async (budget) => {
      await Promise.all([
        consumer.close({ timeoutMs: budget.left() }),
        worker.close({ timeoutMs: budget.left() }),
        metrics?.close(Math.min(budget.left(), 5_000)),
      ]);
      redis.disconnect();
    },
    logger,
    leftBehind:
      'entries being handled stay pending and active retry jobs are left to stalled recovery',
  });
}

main().catch((err: unknown) => reportStartFailure('requeue-stream', err));
