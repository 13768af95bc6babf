import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger } from 'pino';

/**
 * Paths pino blanks before a line is written: webhook secrets, tokens,
 * passwords and auth headers never reach a log.
 */
export const redactPaths = [
  'secret',
  '*.secret',
  '*.*.secret',
  'password',
  '*.password',
  'token',
  '*.token',
  'redisUrl',
  '*.redisUrl',
  'headers.authorization',
  '*.headers.authorization',
  'headers["webhook-signature"]',
  '*.headers["webhook-signature"]',
];

/** Creates the root logger; the level comes from `LOG_LEVEL` unless given. */
export function createLogger(
  options: { level?: string; name?: string; destination?: DestinationStream } = {},
): Logger {
  return pino(
    {
      name: options.name ?? 'requeue',
      level: options.level ?? process.env.LOG_LEVEL ?? 'info',
      redact: { paths: redactPaths, censor: '[redacted]' },
    },
    options.destination,
  );
}

/** `redis://user:secret@host` → `redis://user:***@host`, for messages and logs. */
export function maskUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '[unparseable url]';
  }
}
