import { z } from 'zod';
import { limits } from '../policy/limits.js';
import { ConfigError } from '../errors/config-error.js';
import { parseConfig } from '../util/parse-config.js';
import { defaultSecretHeaders } from '../util/redact.js';

// Pure zod helpers live in src/policy/validate.ts; re-exported for the processes that read config.
export { ConfigError } from '../errors/config-error.js';
export { formatZodError, parseConfig } from '../util/parse-config.js';

/**
 * The one parser of environment strings. Only environment variables are
 * read from strings, and only through these: a config file's values must
 * already have their JSON types.
 */
export const envValue = {
  /** `true`/`false`/`1`/`0` (any case); anything else is an error naming the variable. */
  boolean: () =>
    z
      .string()
      .trim()
      .toLowerCase()
      .pipe(z.enum(['true', 'false', '1', '0'], { error: 'expected true, false, 1 or 0' }))
      .transform((v) => v === 'true' || v === '1'),
  /** A whole number within `[min, max]`; `1e3`, `12abc` and `0x10` are refused. */
  integer: (min: number, max: number) =>
    z
      .string()
      .trim()
      .regex(/^-?\d+$/, 'expected a whole number')
      .transform(Number)
      .pipe(z.number().int().min(min).max(max)),
  /** One of `values`, as written. */
  oneOf: <const T extends readonly [string, ...string[]]>(values: T) => z.enum(values),
  /** A comma-separated list; blanks are dropped. */
  list: () =>
    z.string().transform((text) =>
      text
        .split(',')
        .map((entry) => entry.trim())
        .filter((entry) => entry !== ''),
    ),
} as const;

/** A pino level, as `LOG_LEVEL` may name it. */
export const logLevelSchema = envValue.oneOf([
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
  /**
   * How long a start or a one-shot command waits for Redis's first reply
   * (connect, then PING) before it gives up with exit code 2. @defaultValue `5000`
   */
  REDIS_CONNECT_TIMEOUT_MS: envValue.integer(1, limits.timeoutMs).optional(),
  /** pino level. @defaultValue `info` */
  LOG_LEVEL: logLevelSchema.default('info'),
  /**
   * Extra headers (comma-separated) whose values are never shown, besides
   * Authorization, Cookie, Set-Cookie, Proxy-Authorization and X-Api-Key.
   */
  REQUEUE_REDACT_HEADERS: envValue.list().default([]),
});

export type Env = z.infer<typeof envSchema>;

/**
 * The environment with empty variables left out: `PORT=` means "unset", as
 * in a shell or a compose file.
 */
export function presentEnv(source: NodeJS.ProcessEnv): Record<string, string> {
  return Object.fromEntries(
    Object.entries(source).filter((e): e is [string, string] => e[1] !== undefined && e[1] !== ''),
  );
}

/** Reads and validates the environment; throws a {@link ConfigError} naming the variable. */
export function readEnv(source: NodeJS.ProcessEnv = process.env): Env {
  return parseConfig(envSchema, presentEnv(source), 'env');
}

/** `LOG_LEVEL` alone (a library's default logger needs nothing else). */
export function readLogLevel(
  source: NodeJS.ProcessEnv = process.env,
): z.infer<typeof logLevelSchema> {
  const raw = source.LOG_LEVEL;
  if (raw === undefined || raw === '') return 'info';
  const result = logLevelSchema.safeParse(raw);
  if (result.success) return result.data;
  throw new ConfigError(
    `env.LOG_LEVEL: expected one of ${logLevelSchema.options.join(', ')}, got "${raw}"`,
  );
}

/**
 * The headers never shown: the defaults and `REQUEUE_REDACT_HEADERS`, as
 * options for the redaction module (CLI views, loggers).
 */
export function redactOptionsFromEnv(source: NodeJS.ProcessEnv = process.env): {
  headers: readonly string[];
} {
  const extra = presentEnv(source).REQUEUE_REDACT_HEADERS;
  const parsed = parseConfig(
    envSchema.pick({ REQUEUE_REDACT_HEADERS: true }),
    extra === undefined ? {} : { REQUEUE_REDACT_HEADERS: extra },
    'env',
  );
  return { headers: [...defaultSecretHeaders, ...parsed.REQUEUE_REDACT_HEADERS] };
}
