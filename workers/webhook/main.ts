/**
 * The webhook delivery process: `node dist/workers/webhook/main.js`.
 *
 * Environment (validated up front; a bad value exits with code 2 naming it):
 * - `REDIS_URL` — @defaultValue `redis://127.0.0.1:6379`
 * - `REDIS_CONNECT_TIMEOUT_MS` — a Redis that has not answered by then stops
 *   the start (exit code 2, one line). @defaultValue `5000`
 * - `WEBHOOK_QUEUE` — @defaultValue `webhooks`
 * - `WEBHOOK_CONCURRENCY` — deliveries at once. @defaultValue `16`
 * - `WEBHOOK_ENDPOINT_CONCURRENCY` — deliveries at once to one endpoint (its
 *   bulkhead; a job's `endpoint.maxConcurrency` wins). @defaultValue a quarter
 *   of `WEBHOOK_CONCURRENCY`
 * - `WEBHOOK_BREAKER` — `off` turns the per-endpoint breaker off, or JSON
 *   breaker options over the webhook defaults. @defaultValue on, with
 *   `webhookBreakerDefaults`
 * - `WEBHOOK_ALLOW_PRIVATE` — `true` lets deliveries reach private networks
 *   (never the metadata service). @defaultValue `false`
 * - `WEBHOOK_ALLOW_HOSTS` — comma-separated hosts, IPs or CIDRs let through.
 * - `WEBHOOK_TIMEOUT_MS` — deadline of one attempt. @defaultValue `15000`
 * - `WEBHOOK_SHUTDOWN_TIMEOUT_MS` — on SIGTERM/SIGINT, how long active
 *   deliveries may finish before they are left to stalled recovery; the
 *   process exits by then (plus a moment) whatever they or Redis do. A second
 *   signal exits at once. @defaultValue `30000`
 * - `METRICS_PORT` — serve Prometheus metrics at `/metrics` on this port (0:
 *   any free one). @defaultValue no metrics server
 * - `METRICS_HOST` — the interface it listens on. @defaultValue `127.0.0.1`
 * - `LOG_LEVEL` — @defaultValue `info`
 * - `REQUEUE_REDACT_HEADERS` — comma-separated request headers whose values
 *   are credentials, besides the defaults: never logged, and scrubbed from
 *   what receivers answer. @defaultValue none
 */
import { z } from 'zod';
import { ConfigError, envSchema, parseConfig } from '../../src/config/env.js';
import { createLogger } from '../../src/config/logger.js';
import { queueNameSchema } from '../../src/policy/queue-name.js';
import { checkRedis } from '../../src/redis/check-redis.js';
import { redactText } from '../../src/util/redact.js';
import { defaultRedisUrl } from '../../src/redis/connection.js';
import { parseBreakerOptions } from '../../src/policy/breaker/breaker-options.js';
import { metricsEnvShape, serveMetrics } from '../../src/scheduler/metrics-server.js';
import type { RequeueWorker } from '../../src/scheduler/requeue-worker.js';
import { createWebhookWorker, webhookWorkerDefaults } from './webhook-worker.js';
import { closeOnSignal } from '../../src/util/signals.js';

const flag = z
  .enum(['true', 'false', '1', '0', ''])
  .default('false')
  .transform((value) => value === 'true' || value === '1');

/** The process's environment, every default visible here. */
export const webhookEnvSchema = envSchema.extend({
  WEBHOOK_QUEUE: queueNameSchema.default('webhooks'),
  WEBHOOK_CONCURRENCY: z.coerce
    .number()
    .int()
    .min(1)
    .max(1_000)
    .default(webhookWorkerDefaults.concurrency),
  WEBHOOK_ENDPOINT_CONCURRENCY: z.coerce.number().int().min(1).max(1_000).optional(),
  WEBHOOK_BREAKER: z
    .string()
    .default('')
    .transform((raw, ctx) => {
      if (raw === '' || raw === 'on') return {};
      if (raw === 'off') return false as const;
      try {
        return (
          parseBreakerOptions(JSON.parse(raw), 'WEBHOOK_BREAKER') && (JSON.parse(raw) as object)
        );
      } catch (err) {
        ctx.addIssue({
          code: 'custom',
          message:
            err instanceof ConfigError
              ? err.message
              : 'must be "on", "off" or breaker options as JSON',
        });
        return z.NEVER;
      }
    }),
  WEBHOOK_ALLOW_PRIVATE: flag,
  WEBHOOK_ALLOW_HOSTS: z
    .string()
    .default('')
    .transform((list) =>
      list
        .split(',')
        .map((entry) => entry.trim())
        .filter((entry) => entry !== ''),
    ),
  WEBHOOK_TIMEOUT_MS: z.coerce.number().int().min(1).default(15_000),
  WEBHOOK_SHUTDOWN_TIMEOUT_MS: z.coerce.number().int().min(0).default(30_000),
  ...metricsEnvShape,
});

async function main(): Promise<void> {
  const env = parseConfig(webhookEnvSchema, process.env, 'env');
  const logger = createLogger({ name: 'requeue-webhooks', level: env.LOG_LEVEL });
  const redisUrl = env.REDIS_URL ?? defaultRedisUrl;
  // A Redis that refuses the password or does not answer: one line, not retries for ever.
  await checkRedis(redisUrl, env.REDIS_URL ? 'env.REDIS_URL' : 'redis');
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
  const worker = createWebhookWorker(env.WEBHOOK_QUEUE, {
    connection: redisUrl,
    concurrency: env.WEBHOOK_CONCURRENCY,
    ...(env.WEBHOOK_ENDPOINT_CONCURRENCY !== undefined
      ? { keyConcurrency: env.WEBHOOK_ENDPOINT_CONCURRENCY }
      : {}),
    breaker: env.WEBHOOK_BREAKER,
    allowPrivate: env.WEBHOOK_ALLOW_PRIVATE,
    allowHosts: env.WEBHOOK_ALLOW_HOSTS,
    timeoutMs: env.WEBHOOK_TIMEOUT_MS,
    redactHeaders: env.REQUEUE_REDACT_HEADERS,
    logger,
  });
  metrics?.watch(worker as unknown as RequeueWorker<unknown, unknown>);
  await worker.waitUntilReady();
  logger.info(
    {
      queue: env.WEBHOOK_QUEUE,
      concurrency: env.WEBHOOK_CONCURRENCY,
      allowPrivate: env.WEBHOOK_ALLOW_PRIVATE,
      allowHosts: env.WEBHOOK_ALLOW_HOSTS,
    },
    'webhook worker started',
  );

  // A second signal while draining means "now": what is active comes back through stalled recovery.
  await closeOnSignal({
    timeoutMs: env.WEBHOOK_SHUTDOWN_TIMEOUT_MS,
    close: (budget) =>
      Promise.all([
        worker.close({ timeoutMs: budget.left() }),
        metrics?.close(Math.min(budget.left(), 5_000)),
      ]),
    logger,
    leftBehind: 'active deliveries are left to stalled recovery',
  });
}

main().catch((err: unknown) => {
  if (err instanceof ConfigError) {
    process.stderr.write(`requeue-webhooks: ${err.message}\n`);
    process.exitCode = 2;
    return;
  }
  // One line, secrets blanked (a client's error may quote a URL or AUTH's arguments).
  process.stderr.write(`requeue-webhooks: ${redactText(String((err as Error)?.message ?? err))}\n`);
  process.exitCode = 1;
});
