import { Option, type Command } from 'commander';
import { z } from 'zod';
import { ConfigError } from '../../config/env.js';
import { createLogger, type Logger } from '../../config/logger.js';
import { parseQueueName } from '../../policy/queue-name.js';
import { checkRedis } from '../../redis/check-redis.js';
import { serveMetrics } from '../../scheduler/metrics-server.js';
import type { RequeueWorker } from '../../scheduler/requeue-worker.js';
import { loadHandlerModule } from '../../util/load-module.js';
import { closeOnSignal } from '../../util/signals.js';
import {
  createAmqpConsumer,
  createAmqpRetryWorker,
  amqpRepublishTarget,
  defaultAmqpRetryQueue,
} from '../../../workers/amqp/index.js';
import type { BrokerHandler, BrokerJobData } from '../../../workers/consumer/broker-message.js';
import {
  createNatsConsumer,
  createNatsRetryWorker,
  defaultNatsRetryQueue,
} from '../../../workers/nats/index.js';
import {
  connectTimeoutFrom,
  redisLabel,
  redisUrlFrom,
  withRedisOption,
} from '../connection-flag.js';
import {
  parseWorkerFlags,
  withWorkerFlags,
  workerOptionsFrom,
  type WorkerFlags,
} from '../worker-flags.js';

/** What a started broker consumer exposes to the command. */
interface Running {
  waitUntilReady(): Promise<void>;
  close(options: { timeoutMs?: number }): Promise<void>;
}

/**
 * `requeue consume amqp --url <url> --queue <name> --handler <module>` and
 * `requeue consume nats --servers <url> --stream <name> --consumer <durable> --handler <module>`:
 * a broker consumer and the requeue worker of its retry queue, in one process.
 */
export function registerConsume(program: Command): void {
  const consume = program
    .command('consume')
    .description('Consume a RabbitMQ queue or a JetStream consumer with requeue retries and DLQ');

  common(
    consume
      .command('amqp')
      .description('Consume an AMQP (RabbitMQ) queue: classic or quorum')
      .requiredOption('--url <url>', 'the broker, e.g. amqp://guest:guest@127.0.0.1:5672')
      .requiredOption('--queue <name>', 'the queue to consume (it must exist)')
      .option(
        '--republish-exchange <name>',
        'publish due retries and DLQ replays to this exchange instead of running them here (amq.default: the default exchange, straight to the queue)',
      )
      .option(
        '--republish-routing-key <key>',
        'the republish routing key (default: the queue); implies republishing',
      ),
  ).action(async (opts) => {
    const republish =
      opts.republish === true ||
      opts.republishExchange !== undefined ||
      opts.republishRoutingKey !== undefined;
    const retryQueue = retryQueueFlag(opts.retryQueue, defaultAmqpRetryQueue(opts.queue));
    await run(opts, retryQueue, ({ handler, schema, flags, url, logger, connectTimeoutMs }) => {
      const worker = createAmqpRetryWorker({
        queue: opts.queue,
        retryQueue,
        handler,
        connection: url,
        logger,
        ...(schema && { schema }),
        ...workerOptionsFrom(flags),
        ...(republish && {
          republish: amqpRepublishTarget(
            opts.url,
            opts.republishExchange,
            opts.republishRoutingKey,
          ),
        }),
      });
      const consumer = createAmqpConsumer({
        url: opts.url,
        queue: opts.queue,
        retryQueue,
        handler,
        connection: url,
        concurrency: flags.concurrency,
        connectTimeoutMs,
        breaker: worker,
        logger,
        autorun: false,
        ...(schema && { schema }),
        ...(flags.policy !== undefined && { policy: flags.policy }),
      });
      return { worker, consumer };
    });
  });

  common(
    consume
      .command('nats')
      .description('Consume a NATS JetStream durable pull consumer')
      .requiredOption(
        '--servers <url>',
        'NATS servers, comma-separated, e.g. nats://127.0.0.1:4222',
      )
      .requiredOption('--stream <name>', 'the JetStream stream')
      .requiredOption('--consumer <durable>', 'the durable pull consumer (it must exist)')
      .addOption(
        new Option(
          '--failure-mode <mode>',
          "a failure is nak'ed with requeue's delay (nak) or handed to requeue's retry queue (hand-off)",
        )
          .choices(['hand-off', 'nak'])
          .default('hand-off'),
      )
      .option(
        '--republish-subject <subject>',
        "publish due retries and DLQ replays to this subject instead of running them here (--republish: the message's own subject)",
      ),
  ).action(async (opts) => {
    const republish = opts.republish === true || opts.republishSubject !== undefined;
    const retryQueue = retryQueueFlag(
      opts.retryQueue,
      defaultNatsRetryQueue(opts.stream, opts.consumer),
    );
    await run(opts, retryQueue, ({ handler, schema, flags, url, logger, connectTimeoutMs }) => {
      const worker = createNatsRetryWorker({
        stream: opts.stream,
        consumer: opts.consumer,
        retryQueue,
        handler,
        connection: url,
        logger,
        ...(schema && { schema }),
        ...workerOptionsFrom(flags),
        ...(republish && {
          republish: {
            servers: opts.servers,
            ...(opts.republishSubject !== undefined && { subject: opts.republishSubject }),
          },
        }),
      });
      const consumer = createNatsConsumer({
        servers: opts.servers,
        stream: opts.stream,
        consumer: opts.consumer,
        retryQueue,
        failureMode: opts.failureMode,
        handler,
        connection: url,
        concurrency: flags.concurrency,
        connectTimeoutMs,
        breaker: worker,
        logger,
        autorun: false,
        ...(schema && { schema }),
        ...(flags.policy !== undefined && { policy: flags.policy }),
      });
      return { worker, consumer };
    });
  });
}

function common(command: Command): Command {
  return withRedisOption(
    withWorkerFlags(
      command
        .requiredOption(
          '--handler <module>',
          'a module whose default export is async (message) => void (and may export a zod `schema` for the body)',
        )
        .option(
          '--republish',
          'publish due retries and DLQ replays back to the broker (the consumer runs them) instead of running them here',
        )
        .option(
          '--retry-queue <name>',
          "the requeue queue of the source's retries and dead letters (default: derived from the source's name)",
        ),
      'handlers at once (and the prefetch / pull size)',
    ),
  );
}

function retryQueueFlag(given: string | undefined, derived: string): string {
  return parseQueueName(
    given ?? derived,
    given === undefined ? '--retry-queue (derived)' : '--retry-queue',
  );
}

interface Parts {
  handler: BrokerHandler<unknown>;
  schema: z.ZodType<unknown> | undefined;
  flags: WorkerFlags;
  url: string;
  logger: Logger;
  connectTimeoutMs: number;
}

async function run(
  opts: Record<string, string | undefined>,
  retryQueue: string,
  start: (parts: Parts) => { worker: RequeueWorker<BrokerJobData, void>; consumer: Running },
): Promise<void> {
  const flags = parseWorkerFlags(opts);
  const connectTimeoutMs = connectTimeoutFrom(opts);
  const { handler, exports } = await loadHandlerModule<BrokerHandler<unknown>>(
    opts.handler!,
    '--handler',
  );
  const schema = exports.schema instanceof z.ZodType ? exports.schema : undefined;
  const logger = createLogger();
  const url = redisUrlFrom(opts);
  await checkRedis(url, redisLabel(opts), connectTimeoutMs);
  const { worker, consumer } = start({ handler, schema, flags, url, logger, connectTimeoutMs });
  try {
    await consumer.waitUntilReady();
  } catch (err) {
    await Promise.allSettled([
      consumer.close({ timeoutMs: 1000 }),
      worker.close({ timeoutMs: 1000 }),
    ]);
    // One line naming the broker (its URL without credentials), exit code 2.
    throw new ConfigError(String((err as Error).message).replace(/\s+/g, ' '));
  }
  const metrics =
    flags.metricsPort === undefined
      ? undefined
      : await serveMetrics({
          connection: url,
          port: flags.metricsPort,
          host: flags.metricsHost,
          label: '--metrics-port',
          logger,
        });
  metrics?.watch(worker as RequeueWorker<unknown, unknown>);
  await worker.waitUntilReady();
  logger.info({ retryQueue, concurrency: flags.concurrency }, 'consumer started');
  await closeOnSignal({
    timeoutMs: flags.shutdownTimeoutMs,
    close: async (budget) => {
      await consumer.close({ timeoutMs: Math.floor(budget.left() * 0.6) });
      await Promise.all([
        worker.close({ timeoutMs: budget.left() }),
        metrics?.close(Math.min(budget.left(), 5_000)),
      ]);
    },
    logger,
  });
}
