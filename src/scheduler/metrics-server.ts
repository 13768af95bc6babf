import { z } from 'zod';
import { ConfigError, envValue } from '../config/env.js';
import type { Logger } from '../config/logger.js';
import type { RedisLike } from '../redis/connection.js';
import { withDeadline } from '../util/lifecycle.js';
import { requireOptional } from '../util/optional-deps.js';
import { RequeueMetrics } from './metrics.js';
import { createQueue, type RequeueQueue } from './queue.js';
import type { RequeueWorker } from './requeue-worker.js';

/** The interface metrics listen on unless told otherwise: this host only. */
export const defaultMetricsHost = '127.0.0.1';

/** `METRICS_PORT` and `METRICS_HOST`, for the standalone workers' environment schemas. */
export const metricsEnvShape = {
  /** Serve `GET /metrics` on this port (0: any free one). @defaultValue no metrics server */
  METRICS_PORT: z.preprocess(
    (value) => (value === '' ? undefined : value),
    envValue.integer(0, 65_535).optional(),
  ),
  /** The interface the metrics server listens on. @defaultValue `127.0.0.1` */
  METRICS_HOST: z.preprocess(
    (value) => (value === '' ? undefined : value),
    z.string().min(1).default(defaultMetricsHost),
  ),
};

/** Options of {@link serveMetrics}. */
export interface MetricsServerOptions {
  /** The Redis the workers use: a connection of theirs (not closed here) or a URL. */
  connection: RedisLike;
  /** The port; 0 for any free one. */
  port: number;
  /** @defaultValue `127.0.0.1` */
  host?: string;
  /** Names the setting in a "cannot listen" error, e.g. `--metrics-port` or `env.METRICS_PORT`. */
  label: string;
  logger: Logger;
}

/** A running metrics server. */
export interface MetricsServer {
  /** `http://host:port/metrics`. */
  readonly url: string;
  readonly metrics: RequeueMetrics;
  /** Counts what `worker` does and reads its queue at each scrape. */
  watch(worker: RequeueWorker<unknown, unknown>): void;
  /** Stops listening and closes what it opened, within `timeoutMs`. */
  close(timeoutMs?: number): Promise<void>;
}

/**
 * The standalone processes' `GET /metrics` (`requeue worker --metrics-port`,
 * the webhook and stream workers' `METRICS_PORT`): a small Fastify server
 * with {@link RequeueMetrics} and prom-client's process metrics; anything
 * else is a 404. Started before the workers (then given them with `watch`),
 * so a port it cannot listen on — a {@link ConfigError} naming `label` —
 * stops the start before any worker runs.
 */
export async function serveMetrics(options: MetricsServerOptions): Promise<MetricsServer> {
  // Fastify is an optional peer: loaded here, so the library and CLI load without it.
  requireOptional(['fastify'], options.label);
  const { default: Fastify } = await import('fastify');
  const host = options.host ?? defaultMetricsHost;
  const logger = options.logger.child({ component: 'metrics' });
  const metrics = new RequeueMetrics(undefined, { logger });
  const queues: RequeueQueue[] = [];
  const closeQueues = () => Promise.allSettled(queues.map((q) => q.close()));
  // Keep-alive connections (Prometheus keeps one) must not hold close() up.
  const app = Fastify({ logger: false, forceCloseConnections: true });
  app.get('/metrics', async (_request, reply) => {
    const { contentType, body } = await metrics.render();
    return reply.type(contentType).send(body);
  });
  app.setErrorHandler((err, _request, reply) => {
    logger.warn({ err }, 'metrics scrape failed');
    return reply.code(500).send('metrics unavailable\n');
  });
  try {
    await app.listen({ port: options.port, host });
  } catch (err) {
    await Promise.allSettled([app.close(), closeQueues()]);
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw new ConfigError(`${options.label}: cannot listen on ${host}:${options.port} (${code})`);
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : options.port;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}/metrics`;
  logger.info({ url }, 'metrics served');
  let closing: Promise<void> | undefined;
  return {
    url,
    metrics,
    watch: (worker) => {
      metrics.watch(worker);
      // Counts are BullMQ's getters, on a Queue of the workers' connection.
      const queue = createQueue(worker.name, { connection: options.connection });
      queues.push(queue);
      metrics.watchQueue(queue);
    },
    close: (timeoutMs = 5_000) =>
      (closing ??= (async () => {
        await withDeadline(Promise.allSettled([app.close(), closeQueues()]), timeoutMs);
      })()),
  };
}
