import { z } from 'zod';
import { parseConfig } from '../policy/validate.js';

// Pure zod helpers live in src/policy/validate.ts; re-exported for the processes that read config.
export { ConfigError, formatZodError, parseConfig } from '../policy/validate.js';

/** A pino level, as `LOG_LEVEL` may name it. */
export const logLevelSchema = z.enum([
  'fatal',
  'error',
  'warn',
  'info',
  'debug',
  'trace',
  'silent',
]);

/**
 * The environment requeue reads, validated in one place. Every process
 * (CLI, workers, service) goes through {@link readEnv}.
 */
export const envSchema = z.object({
  /** Redis connection URL, e.g. `redis://:password@host:6379/0`. */
  REDIS_URL: z.string().url().optional(),
  /** pino level. @defaultValue `info` */
  LOG_LEVEL: logLevelSchema.default('info'),
});

export type Env = z.infer<typeof envSchema>;

/** Reads and validates the environment; throws a {@link ConfigError} naming the variable. */
export function readEnv(source: NodeJS.ProcessEnv = process.env): Env {
  return parseConfig(envSchema, source, 'env');
}
