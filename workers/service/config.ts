import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { ConfigError, parseConfig } from '../../src/config/env.js';
import { breakerOptionsSchema } from '../../src/policy/breaker/breaker-options.js';
import { budgetOptionsSchema } from '../../src/policy/budget/budget-options.js';
import { retryPolicySchema } from '../../src/policy/retry-policy.js';

const queueName = z
  .string()
  .min(1)
  .regex(/^[^:]+$/, 'must not contain ":"');

/** A queue the service runs a handler module on. */
const handlerQueueSchema = z.strictObject({
  name: queueName,
  /** A module whose default export is `async (job) => result`, as for `requeue worker --handler`. */
  handler: z.string().min(1),
  concurrency: z.number().int().min(1).default(4),
  policy: retryPolicySchema.optional(),
  breaker: breakerOptionsSchema.optional(),
  budget: budgetOptionsSchema.optional(),
});

/**
 * The service's configuration, from a JSON file (`REQUEUE_CONFIG`) and the
 * environment (which wins), validated at start with messages that name the
 * field. Defaults are here and nowhere else.
 */
export const serviceConfigSchema = z.strictObject({
  /** HTTP port of the intake API, `/healthz`, `/readyz` and `/metrics`. @defaultValue `8080` */
  port: z.coerce.number().int().min(0).max(65535).default(8080),
  /** Interface to listen on. @defaultValue `127.0.0.1` */
  host: z.string().min(1).default('127.0.0.1'),
  /** Redis URL; unset: 127.0.0.1:6379 if it answers, else an embedded redis-server. */
  redisUrl: z.string().url().optional(),
  /** Where the embedded redis-server keeps its AOF. @defaultValue `.requeue` */
  dataDir: z.string().min(1).default('.requeue'),
  /** On SIGTERM, how long active jobs may take to finish. @defaultValue `30_000` */
  shutdownTimeoutMs: z.coerce.number().int().min(0).default(30_000),
  intake: z
    .strictObject({
      /** If set, POSTs need `Authorization: Bearer <token>`. Never logged. */
      token: z.string().min(16).optional(),
      /** Largest request body accepted. @defaultValue `1_048_576` */
      maxBodyBytes: z.number().int().positive().default(1_048_576),
    })
    .prefault({}),
  webhooks: z
    .strictObject({
      /** Run the webhook delivery worker. @defaultValue `true` */
      enabled: z.boolean().default(true),
      /** @defaultValue `webhooks` */
      queue: queueName.default('webhooks'),
      /** @defaultValue `16` */
      concurrency: z.coerce.number().int().min(1).default(16),
      /** Per delivery. @defaultValue `15_000` */
      timeoutMs: z.coerce.number().int().positive().default(15_000),
      /** Deliver to loopback/private addresses (development and tests only). @defaultValue `false` */
      allowPrivate: z.coerce.boolean().default(false),
      policy: retryPolicySchema.optional(),
      /** A breaker per endpoint. @defaultValue the breaker's defaults */
      breaker: breakerOptionsSchema.optional(),
      budget: budgetOptionsSchema.optional(),
    })
    .prefault({}),
  /** Queues processed by handler modules. @defaultValue `[]` */
  queues: z.array(handlerQueueSchema).default([]),
});

export type ServiceConfig = z.output<typeof serviceConfigSchema>;

/** The environment variables the service reads, and where each goes. */
export const envMapping: Record<string, string[]> = {
  PORT: ['port'],
  HOST: ['host'],
  REDIS_URL: ['redisUrl'],
  REQUEUE_DATA_DIR: ['dataDir'],
  REQUEUE_SHUTDOWN_TIMEOUT_MS: ['shutdownTimeoutMs'],
  REQUEUE_INTAKE_TOKEN: ['intake', 'token'],
  WEBHOOK_QUEUE: ['webhooks', 'queue'],
  WEBHOOK_CONCURRENCY: ['webhooks', 'concurrency'],
  WEBHOOK_TIMEOUT_MS: ['webhooks', 'timeoutMs'],
  WEBHOOK_ALLOW_PRIVATE: ['webhooks', 'allowPrivate'],
};

/**
 * Reads the file named by `REQUEUE_CONFIG` (if any), lays the environment
 * over it, and validates the result.
 */
export async function loadServiceConfig(
  env: NodeJS.ProcessEnv = process.env,
): Promise<ServiceConfig> {
  let base: Record<string, unknown> = {};
  const file = env.REQUEUE_CONFIG;
  if (file) {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (err) {
      throw new ConfigError(`REQUEUE_CONFIG: cannot read ${file} (${(err as Error).message})`);
    }
    try {
      base = JSON.parse(text) as Record<string, unknown>;
    } catch (err) {
      throw new ConfigError(
        `REQUEUE_CONFIG: ${file} is not valid JSON (${(err as Error).message})`,
      );
    }
  }
  return parseServiceConfig(base, env);
}

/** Validates a config object with the environment laid over it. */
export function parseServiceConfig(
  base: Record<string, unknown>,
  env: NodeJS.ProcessEnv = {},
): ServiceConfig {
  const merged: Record<string, unknown> = structuredClone(base);
  for (const [name, path] of Object.entries(envMapping)) {
    const value = env[name];
    if (value === undefined || value === '') continue;
    let target = merged;
    for (const part of path.slice(0, -1)) {
      const next = target[part];
      target[part] = typeof next === 'object' && next !== null ? next : {};
      target = target[part] as Record<string, unknown>;
    }
    target[path.at(-1)!] =
      name === 'WEBHOOK_ALLOW_PRIVATE' ? ['1', 'true', 'yes'].includes(value) : value;
  }
  return parseConfig(serviceConfigSchema, merged, 'config');
}
