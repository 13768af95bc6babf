import { readFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { z } from 'zod';
import { retryQueueNameFor } from '../consumer/dedupe-key.js';
import {
  ConfigError,
  envValue,
  logLevelSchema,
  parseConfig,
  presentEnv,
} from '../../src/config/env.js';
import { breakerOptionsSchema } from '../../src/policy/breaker/breaker-options.js';
import { budgetOptionsSchema } from '../../src/policy/budget/budget-options.js';
import { limits } from '../../src/policy/limits.js';
import { checkQueueSet, queueNameSchema } from '../../src/policy/queue-name.js';
import { retryPolicySchema } from '../../src/policy/retry-policy.js';
import { retryOrderSchema } from '../../src/scheduler/worker-options.js';
import { webhookBreakerDefaults } from '../webhook/webhook-worker.js';

/**
 * The webhook breaker's options as given: checked as the breaker will use
 * them (over the webhook defaults), but kept without the library's defaults
 * filled in, so that a setting left out takes the webhook worker's default
 * (`webhookBreakerDefaults`), not the generic breaker's.
 */
const webhookBreakerSchema = z
  .record(z.string(), z.unknown())
  .superRefine((given, ctx) => {
    const checked = breakerOptionsSchema.safeParse({ ...webhookBreakerDefaults, ...given });
    if (checked.success) return;
    for (const issue of checked.error.issues)
      ctx.addIssue({ code: 'custom', message: issue.message, path: issue.path });
  })
  .transform((given) => given as z.input<typeof breakerOptionsSchema>);

/** A host name (RFC 1123 labels) or an IP address to listen on. */
const hostSchema = z
  .string()
  .refine(
    (host) =>
      isIP(host) !== 0 ||
      /^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/.test(
        host,
      ),
    'must be an IP address or a host name',
  );

const concurrency = z.number().int().min(1).max(limits.concurrency);
const timeoutMs = z.number().int().min(0).max(limits.timeoutMs);

/** A queue the service runs a handler module on. */
const handlerQueueSchema = z.strictObject({
  name: queueNameSchema,
  /** A module whose default export is `async (job) => result`, as for `requeue worker --handler`. */
  handler: z.string().min(1),
  /** @defaultValue `4` */
  concurrency: concurrency.default(4),
  policy: retryPolicySchema.optional(),
  breaker: breakerOptionsSchema.optional(),
  budget: budgetOptionsSchema.optional(),
  /** Due retries ahead of waiting new work or behind it (`createWorker`'s `retryOrder`). @defaultValue `'first'` */
  retryOrder: retryOrderSchema.shape.retryOrder,
  /** With `retryOrder: 'first'`, the most of the jobs taken that may be retries moved ahead. @defaultValue `0.5` */
  retryShare: retryOrderSchema.shape.retryShare,
});

/**
 * A broker consumer (`requeue/amqp`, `requeue/nats`) that runs elsewhere
 * (`requeue consume`, workers/consumer/main.ts): the service watches its
 * retry queue (counts, metrics, DLQ, dashboard) and runs no worker on it.
 */
const consumerQueueSchema = z.discriminatedUnion('broker', [
  z.strictObject({
    broker: z.literal('amqp'),
    /** The AMQP queue the consumer reads. */
    queue: z.string().min(1),
    /** @defaultValue derived from `queue`, as the consumer derives it */
    retryQueue: queueNameSchema.optional(),
  }),
  z.strictObject({
    broker: z.literal('nats'),
    /** The JetStream stream. */
    stream: z.string().min(1),
    /** The durable consumer. */
    consumer: z.string().min(1),
    /** @defaultValue derived from `stream` and `consumer`, as the consumer derives it */
    retryQueue: queueNameSchema.optional(),
  }),
]);

/**
 * The service's configuration, from a JSON file (`REQUEUE_CONFIG`) and the
 * environment (which wins), validated at start with messages that name the
 * field. The file's values must have these JSON types (`"false"` is not a
 * boolean); environment variables are parsed from strings by
 * {@link serviceEnvSchema} alone. Defaults are here and nowhere else.
 */
export const serviceConfigSchema = z.strictObject({
  /** HTTP port of the intake API, `/healthz`, `/readyz` and `/metrics`. @defaultValue `8080` */
  port: z.number().int().min(0).max(65535).default(8080),
  /** Interface to listen on. @defaultValue `127.0.0.1` */
  host: hostSchema.default('127.0.0.1'),
  /** Redis URL; unset: 127.0.0.1:6379 if it answers, else an embedded redis-server. */
  redisUrl: z
    .url({ protocol: /^rediss?$/, error: 'must be a redis:// or rediss:// URL' })
    .optional(),
  /** Where the embedded redis-server keeps its AOF. @defaultValue `.requeue` */
  dataDir: z.string().min(1).default('.requeue'),
  /** On SIGTERM, how long active jobs may take to finish. @defaultValue `30_000` */
  shutdownTimeoutMs: timeoutMs.default(30_000),
  /** pino level. @defaultValue `info` */
  logLevel: logLevelSchema.default('info'),
  /** Headers whose values logs and views never show, besides the defaults. @defaultValue `[]` */
  redactHeaders: z.array(z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/)).default([]),
  intake: z
    .strictObject({
      /** If set, POSTs need `Authorization: Bearer <token>`. Never logged. */
      token: z.string().min(16).max(limits.token).optional(),
      /** Largest request body accepted. @defaultValue `1_048_576` */
      maxBodyBytes: z.number().int().positive().max(limits.bodyBytes).default(1_048_576),
    })
    .prefault({}),
  admin: z
    .strictObject({
      /**
       * If set, the admin API and the dashboard need `Authorization: Bearer <token>`.
       * Unset, they are served only when `host` is a loopback address. Never logged.
       */
      token: z.string().min(16).max(limits.token).optional(),
      /**
       * Host names (or addresses) besides loopback that requests may name in
       * `Host` when no token is set, e.g. a name in /etc/hosts; any other is
       * refused (421), which stops DNS rebinding. @defaultValue `[]`
       */
      allowedHosts: z.array(hostSchema).max(100).default([]),
    })
    .prefault({}),
  webhooks: z
    .strictObject({
      /** Run the webhook delivery worker. @defaultValue `true` */
      enabled: z.boolean().default(true),
      /** @defaultValue `webhooks` */
      queue: queueNameSchema.default('webhooks'),
      /** @defaultValue `16` */
      concurrency: concurrency.default(16),
      /** Per delivery. @defaultValue `15_000` */
      timeoutMs: timeoutMs.min(1).default(15_000),
      /** Deliver to loopback/private addresses (development and tests only). @defaultValue `false` */
      allowPrivate: z.boolean().default(false),
      policy: retryPolicySchema.optional(),
      /** A breaker per endpoint, over the webhook defaults. @defaultValue `webhookBreakerDefaults` */
      breaker: webhookBreakerSchema.optional(),
      budget: budgetOptionsSchema.optional(),
      /** Due retries ahead of waiting new deliveries or behind them. @defaultValue `'first'` */
      retryOrder: retryOrderSchema.shape.retryOrder,
      /** With `retryOrder: 'first'`, the most of the jobs taken that may be retries moved ahead. @defaultValue `0.5` */
      retryShare: retryOrderSchema.shape.retryShare,
    })
    .prefault({}),
  /** Queues processed by handler modules. @defaultValue `[]` */
  queues: z.array(handlerQueueSchema).max(100).default([]),
  /** Broker consumers whose retry queues the service shows (no worker runs here). @defaultValue `[]` */
  consumers: z.array(consumerQueueSchema).max(100).default([]),
});

export type ServiceConfig = z.output<typeof serviceConfigSchema>;

/**
 * The environment variables the service reads, each parsed from its string
 * by the one environment parser ({@link envValue}), with the config path it
 * sets.
 */
const envSettings = {
  PORT: { path: ['port'], schema: envValue.integer(0, 65535) },
  HOST: { path: ['host'], schema: z.string() },
  REDIS_URL: { path: ['redisUrl'], schema: z.string() },
  REQUEUE_DATA_DIR: { path: ['dataDir'], schema: z.string() },
  REQUEUE_SHUTDOWN_TIMEOUT_MS: {
    path: ['shutdownTimeoutMs'],
    schema: envValue.integer(0, limits.timeoutMs),
  },
  LOG_LEVEL: { path: ['logLevel'], schema: logLevelSchema },
  REQUEUE_REDACT_HEADERS: { path: ['redactHeaders'], schema: envValue.list() },
  REQUEUE_INTAKE_TOKEN: { path: ['intake', 'token'], schema: z.string() },
  REQUEUE_ADMIN_TOKEN: { path: ['admin', 'token'], schema: z.string() },
  REQUEUE_ADMIN_ALLOWED_HOSTS: { path: ['admin', 'allowedHosts'], schema: envValue.list() },
  WEBHOOK_QUEUE: { path: ['webhooks', 'queue'], schema: z.string() },
  WEBHOOK_CONCURRENCY: {
    path: ['webhooks', 'concurrency'],
    schema: envValue.integer(1, limits.concurrency),
  },
  WEBHOOK_TIMEOUT_MS: {
    path: ['webhooks', 'timeoutMs'],
    schema: envValue.integer(1, limits.timeoutMs),
  },
  WEBHOOK_ALLOW_PRIVATE: { path: ['webhooks', 'allowPrivate'], schema: envValue.boolean() },
} as const;

/** The environment the service reads, parsed from strings; errors name the variable. */
export const serviceEnvSchema = z.object(
  Object.fromEntries(
    Object.entries(envSettings).map(([name, { schema }]) => [name, schema.optional()]),
  ) as { [K in keyof typeof envSettings]: z.ZodOptional<(typeof envSettings)[K]['schema']> },
);

/** The environment variables the service reads, and where each goes. */
export const envMapping: Record<string, readonly string[]> = Object.fromEntries(
  Object.entries(envSettings).map(([name, { path }]) => [name, path]),
);

/**
 * Reads the file named by `REQUEUE_CONFIG` (if any), lays the environment
 * over it, and validates the result.
 */
export async function loadServiceConfig(
  env: NodeJS.ProcessEnv = process.env,
): Promise<ServiceConfig> {
  let base: unknown = {};
  const file = env.REQUEUE_CONFIG;
  if (file) {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (err) {
      throw new ConfigError(
        `env.REQUEUE_CONFIG: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
      );
    }
    try {
      base = JSON.parse(text);
    } catch (err) {
      throw new ConfigError(
        `env.REQUEUE_CONFIG: ${file} is not valid JSON (${(err as Error).message})`,
      );
    }
  }
  return parseServiceConfig(base, env);
}

/**
 * Validates a config object with the environment laid over it: the file's
 * values as they are (strictly typed), the environment's parsed from strings.
 * Queue names are checked together: no two alike, none the webhook queue's.
 */
export function parseServiceConfig(base: unknown, env: NodeJS.ProcessEnv = {}): ServiceConfig {
  if (base === null || typeof base !== 'object' || Array.isArray(base))
    throw new ConfigError('config: must be a JSON object');
  const fromEnv = parseConfig(serviceEnvSchema, presentEnv(env), 'env') as Record<string, unknown>;
  const merged: Record<string, unknown> = structuredClone(base as Record<string, unknown>);
  for (const [name, path] of Object.entries(envMapping)) {
    const value = fromEnv[name];
    if (value === undefined) continue;
    let target = merged;
    for (const part of path.slice(0, -1)) {
      const next = target[part];
      target[part] = typeof next === 'object' && next !== null ? next : {};
      target = target[part] as Record<string, unknown>;
    }
    target[path.at(-1)!] = value;
  }
  const config = parseConfig(serviceConfigSchema, merged, 'config');
  checkQueueSet([
    ...(config.webhooks.enabled
      ? [{ label: 'config.webhooks.queue', name: config.webhooks.queue }]
      : []),
    ...config.queues.map((q, i) => ({ label: `config.queues.${i}.name`, name: q.name })),
    ...config.consumers.map((c, i) => ({
      label: `config.consumers.${i}.retryQueue`,
      name: consumerRetryQueue(c).name,
    })),
  ]);
  return config;
}

/** A watched consumer's retry queue and what it shows as its source (`<queue>` or `<stream>/<consumer>`). */
export function consumerRetryQueue(c: ServiceConfig['consumers'][number]): {
  name: string;
  source: string;
} {
  return c.broker === 'amqp'
    ? { name: c.retryQueue ?? retryQueueNameFor([c.queue]), source: c.queue }
    : {
        name: c.retryQueue ?? retryQueueNameFor([c.stream, c.consumer]),
        source: `${c.stream}/${c.consumer}`,
      };
}
