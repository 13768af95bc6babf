import { ConfigError } from '../../src/config/env.js';
import { createLogger, maskUrl, type Logger } from '../../src/config/logger.js';
import { checkRedis } from '../../src/redis/check-redis.js';
import { connectRedis, type RedisClient } from '../../src/redis/connection.js';
import { RequeueMetrics } from '../../src/scheduler/metrics.js';
import { createQueue, type RequeueQueue } from '../../src/scheduler/queue.js';
import {
  createWorker,
  type Handler,
  type RequeueWorker,
} from '../../src/scheduler/requeue-worker.js';
import { withDeadline } from '../../src/util/lifecycle.js';
import { loadHandlerModule } from '../../src/util/load-module.js';
import { shutdownBudget, type ShutdownBudget } from '../../src/util/signals.js';
import { createWebhookWorker, enqueueWebhook, webhookJobSchema } from '../webhook/index.js';
import { consumerRetryQueue, type ServiceConfig } from './config.js';
import { chooseRedis, type RedisChoice } from './embedded-redis.js';
import { createIntakeServer, type IntakeOptions, type IntakeServer } from './http.js';
import { messageIntake } from './messages.js';
import type { AdminQueue } from './admin/index.js';

/** A running requeue service. */
export interface RunningService {
  readonly url: string;
  readonly redis: RedisChoice;
  readonly workers: RequeueWorker<unknown, unknown>[];
  /**
   * Stops taking jobs, drains, closes everything (and the embedded Redis),
   * within `timeoutMs` whatever handlers or Redis do: jobs still active then
   * are left to stalled recovery. @defaultValue `timeoutMs`: the config's
   * `shutdownTimeoutMs`
   */
  stop(options?: { timeoutMs?: number }): Promise<void>;
}

/**
 * Starts the requeue service: the configured workers (webhook delivery and
 * handler queues), the intake HTTP API, health and metrics.
 */
export async function startService(
  config: ServiceConfig,
  logger: Logger = createLogger({ level: config.logLevel, redactHeaders: config.redactHeaders }),
): Promise<RunningService> {
  // Handler modules first: one that does not load stops the start before anything is opened.
  const handled = await Promise.all(
    config.queues.map(async (q, index) => {
      const { handler } = await loadHandlerModule<Handler<unknown, unknown>>(
        q.handler,
        `config.queues.${index}.handler`,
      );
      return { ...q, handler };
    }),
  );
  // What is opened is closed again if the start fails, in reverse order.
  const opened: (() => Promise<unknown> | void)[] = [];
  const closeOpened = async (): Promise<void> => {
    for (const close of opened.reverse()) await Promise.resolve(close()).catch(() => undefined);
  };
  try {
    const redisChoice = await chooseRedis(config.redisUrl, config.dataDir, logger);
    // Ended before stop() has run (a shutdown deadline, a crash), the process must not leave
    // its embedded redis-server behind: stop() sends it SIGTERM synchronously.
    const stopEmbeddedRedis = (): void => void redisChoice.server?.stop();
    if (redisChoice.server) {
      process.once('exit', stopEmbeddedRedis);
      opened.push(async () => {
        await redisChoice.server?.stop();
        process.off('exit', stopEmbeddedRedis);
      });
    }
    await checkRedis(redisChoice.url, config.redisUrl !== undefined ? 'config.redisUrl' : 'redis');
    const running = await startOn(config, logger, handled, redisChoice, opened);
    const stop = running.stop;
    return {
      ...running,
      stop: async ({ timeoutMs = config.shutdownTimeoutMs } = {}) => {
        const budget = shutdownBudget(timeoutMs);
        await stop(budget);
        // Cut short, the exit handler still sends the embedded Redis its SIGTERM.
        if (redisChoice.server) await withDeadline(redisChoice.server.stop(), budget.left());
        process.off('exit', stopEmbeddedRedis);
        logger.info('requeue service stopped');
      },
    };
  } catch (err) {
    await closeOpened();
    throw err;
  }
}

async function startOn(
  config: ServiceConfig,
  logger: Logger,
  handled: (Omit<ServiceConfig['queues'][number], 'handler'> & {
    handler: Handler<unknown, unknown>;
  })[],
  redisChoice: RedisChoice,
  opened: (() => Promise<unknown> | void)[],
): Promise<Omit<RunningService, 'stop'> & { stop(budget: ShutdownBudget): Promise<void> }> {
  // A Cluster when REDIS_CLUSTER says so, REDIS_URL naming a seed node.
  const connection: RedisClient = connectRedis(redisChoice.url);
  opened.push(() => connection.disconnect());
  const metrics = new RequeueMetrics(undefined, { logger });
  const queues = new Map<string, RequeueQueue>();
  const workers: RequeueWorker<unknown, unknown>[] = [];
  opened.push(async () => {
    await Promise.all(workers.map((w) => w.close({ timeoutMs: 1_000 })));
    await Promise.all([...queues.values()].map((q) => q.close()));
  });

  for (const q of handled) {
    const worker = createWorker(q.name, q.handler, {
      connection,
      concurrency: q.concurrency,
      logger,
      ...(q.policy ? { policy: q.policy } : {}),
      ...(q.breaker ? { breaker: q.breaker } : {}),
      ...(q.budget ? { budget: q.budget } : {}),
      ...(q.retryOrder ? { retryOrder: q.retryOrder } : {}),
      ...(q.retryShare !== undefined ? { retryShare: q.retryShare } : {}),
    });
    workers.push(worker);
    const queue = createQueue(q.name, { connection });
    queues.set(q.name, queue);
    metrics.watchQueue(queue);
  }

  // Broker consumers' retry queues: watched (counts, metrics, DLQ, dashboard), run elsewhere.
  const watched = new Map<string, { kind: 'amqp' | 'nats'; source: string }>();
  for (const c of config.consumers) {
    const { name, source } = consumerRetryQueue(c);
    watched.set(name, { kind: c.broker, source });
    const queue = createQueue(name, { connection });
    queues.set(name, queue);
    metrics.watchQueue(queue);
  }

  let webhooks:
    | { schema: typeof webhookJobSchema; enqueue: (job: unknown) => Promise<{ id: string }> }
    | undefined;
  let messages: IntakeOptions['messages'];
  if (config.webhooks.enabled) {
    const w = config.webhooks;
    const worker = createWebhookWorker(w.queue, {
      connection,
      concurrency: w.concurrency,
      timeoutMs: w.timeoutMs,
      allowPrivate: w.allowPrivate,
      redactHeaders: config.redactHeaders,
      logger,
      ...(w.policy ? { policy: w.policy } : {}),
      breaker: w.breaker ?? {},
      ...(w.budget ? { budget: w.budget } : {}),
      ...(w.retryOrder ? { retryOrder: w.retryOrder } : {}),
      ...(w.retryShare !== undefined ? { retryShare: w.retryShare } : {}),
    });
    workers.push(worker as unknown as RequeueWorker<unknown, unknown>);
    const queue = createQueue(w.queue, { connection });
    queues.set(w.queue, queue);
    metrics.watchQueue(queue);
    webhooks = {
      schema: webhookJobSchema,
      enqueue: (job) => enqueueWebhook(queue, job as Parameters<typeof enqueueWebhook>[1]),
    };
    messages = messageIntake(queue, connection);
  }
  for (const worker of workers) metrics.watch(worker);
  await Promise.all(workers.map((w) => w.waitUntilReady()));

  // Loaded only now: a start that fails earlier (config, handler, Redis) need not load the
  // admin API's and the dashboard's dependencies (swagger, static files) first.
  const { adminAccess, adminStartLine, registerAdmin, siteRules } =
    await import('./admin/index.js');
  const access = adminAccess(config.host, config.admin.token);
  const server: IntakeServer = await createIntakeServer({
    site: siteRules(access, config.admin.allowedHosts),
    queues,
    ...(webhooks ? { webhooks } : {}),
    ...(messages ? { messages } : {}),
    ready: async () => (await connection.ping()) === 'PONG' && workers.every((w) => w.isRunning()),
    metrics,
    ...(config.intake.token ? { token: config.intake.token } : {}),
    maxBodyBytes: config.intake.maxBodyBytes,
    logger,
  });
  opened.push(() => server.close());
  await registerAdmin(server, {
    queues: adminQueues(queues, workers, config, watched),
    redis: connection,
    access,
    host: config.host,
    redactHeaders: config.redactHeaders,
    logger,
    endpointWrites: { allowPrivate: config.webhooks.allowPrivate },
  });
  try {
    await server.listen({ port: config.port, host: config.host });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    const field = code === 'EADDRINUSE' || code === 'EACCES' ? 'config.port' : 'config.host';
    throw new ConfigError(`${field}: cannot listen on ${config.host}:${config.port} (${code})`);
  }
  const address = server.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const url = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
  logger.info(
    {
      url,
      // The password, if any, is masked: secrets never reach a log line.
      redis: { source: redisChoice.source, url: maskUrl(redisChoice.url) },
      queues: [...queues.keys()],
      webhooks: config.webhooks.enabled,
    },
    'requeue service started',
  );
  if (access.kind === 'refused') logger.warn(adminStartLine(access, url, config.host));
  else logger.info(adminStartLine(access, url, config.host));

  let stopping: Promise<void> | undefined;
  // Every step within what is left of one budget: the intake and the workers side by side.
  const stop = (budget: ShutdownBudget) =>
    (stopping ??= (async () => {
      await Promise.all([
        withDeadline(server.close(), budget.left()),
        ...workers.map((w) => w.close({ timeoutMs: budget.left() })),
      ]);
      await withDeadline(
        Promise.allSettled([...queues.values()].map((q) => q.close())),
        budget.left(),
      );
      connection.disconnect();
    })());
  return { url, redis: redisChoice, workers, stop };
}

/** The service's queues as the admin API sees them, with their workers' breaker and budget options. */
function adminQueues(
  queues: Map<string, RequeueQueue>,
  workers: RequeueWorker<unknown, unknown>[],
  config: ServiceConfig,
  watched: Map<string, { kind: 'amqp' | 'nats'; source: string }>,
): AdminQueue[] {
  return [...queues].map(([name, queue]) => {
    const worker = workers.find((w) => w.name === name);
    const consumer = watched.get(name);
    return {
      name,
      kind:
        consumer?.kind ??
        (config.webhooks.enabled && name === config.webhooks.queue ? 'webhook' : 'handler'),
      ...(consumer && { source: consumer.source }),
      queue,
      breaker: worker?.breakerOptions,
      budget: worker?.budgetOptions,
    };
  });
}
