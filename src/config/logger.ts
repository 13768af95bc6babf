import { once } from 'node:events';
import { destination, pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import { readLogLevel, redactOptionsFromEnv } from './env.js';
import {
  censor,
  defaultSecretHeaders,
  pinoRedactPaths,
  redactError,
  redactUrl,
} from '../util/redact.js';
import { withDeadline } from '../util/lifecycle.js';
import { beforeShutdownExit } from '../util/signals.js';
import { systemClock } from '../util/system.js';

export type { Logger } from 'pino';

/**
 * Paths pino blanks before a line is written: webhook secrets, tokens,
 * passwords, secret headers, a failed Redis command's arguments. URLs under
 * `url` and `redisUrl` keep their host and lose their credentials.
 * @see src/util/redact.ts, the one redaction module
 */
export const redactPaths = pinoRedactPaths();

/** URL-valued keys: redacted as URLs, not blanked. */
const urlKeys = new Set(['url', 'redisUrl']);

/**
 * pino's options for a line with no secret in it: `redact` paths (URL keys
 * through {@link redactUrl}, the rest blanked) and an `err`/`error`
 * serializer that redacts messages, stacks and client errors' commands.
 */
export function redactingLoggerOptions(
  headers: readonly string[] = defaultSecretHeaders,
): Pick<LoggerOptions, 'redact' | 'serializers'> {
  const paths = pinoRedactPaths(headers);
  for (const prefix of ['', '*.', '*.*.']) paths.push(`${prefix}url`);
  const serializer = (err: unknown) => redactError(err, { headers });
  return {
    redact: {
      paths,
      censor: (value: unknown, path: string[]) =>
        urlKeys.has(path.at(-1) ?? '') && typeof value === 'string' ? redactUrl(value) : censor,
    },
    serializers: { err: serializer, error: serializer },
  };
}

/**
 * Creates the root logger. The level comes from `LOG_LEVEL` (read through
 * the one environment parser, so `LOG_LEVEL=verbose` is a {@link ConfigError}
 * naming it) unless given.
 */
export function createLogger(
  options: {
    level?: string;
    name?: string;
    destination?: DestinationStream;
    redactHeaders?: readonly string[];
  } = {},
): Logger {
  return pino(
    {
      name: options.name ?? 'requeue',
      level: options.level ?? readLogLevel(),
      ...redactingLoggerOptions(options.redactHeaders ?? redactOptionsFromEnv().headers),
    },
    options.destination ?? stdout(),
  );
}

let stdoutStream: DestinationStream | undefined;

/**
 * Standard output, shared by the loggers {@link createLogger} makes: pino's
 * own asynchronous destination, except that a shutdown's exit flushes it
 * within a bound. pino flushes it on exit otherwise, retrying a full pipe
 * every 100 ms for ever: a log reader that stalls would hold a stopping
 * process past its deadline.
 */
function stdout(): DestinationStream {
  if (stdoutStream) return stdoutStream;
  let flushUntil = Infinity;
  const stream = destination({
    dest: 1,
    sync: false,
    retryEAGAIN: () => systemClock.now() < flushUntil,
  });
  beforeShutdownExit(async (timeoutMs) => {
    const until = systemClock.now() + timeoutMs;
    // The write in flight first: flushSync alone writes what is queued behind it before it
    // (sonic-boom 4 has no public flag for it, so a later one without it just skips the wait).
    if ((stream as unknown as { _writing?: unknown })._writing === true) {
      await withDeadline(
        once(stream, 'drain').catch(() => undefined),
        timeoutMs,
      );
    }
    flushUntil = until;
    try {
      stream.flushSync();
    } catch {
      // The reader took nothing more in time: drop the rest, so pino's exit flush has none to wait on.
      stream.destroy();
    }
  });
  stdoutStream = stream;
  return stream;
}

/**
 * What a library object (worker, DLQ, metrics, webhook worker, stream
 * consumer) takes as `logger`: a pino logger, used as is, or pino options
 * for one of requeue's own (redacting, on stderr).
 */
export type LoggerOption = Logger | LoggerOptions;

/** The library's logger when given none, shared: warnings and errors, on stderr. */
let quietLogger: Logger | undefined;

/**
 * The logger a library object uses. Given nothing: `warn` and above, on
 * stderr — stdout belongs to the host application, and a retry is not news.
 * Given pino options: a redacting logger with them, on stderr. Given a pino
 * logger: that logger, wherever it writes. The CLI and the service pass
 * their own {@link createLogger} (stdout, `LOG_LEVEL`).
 */
export function libraryLogger(option?: LoggerOption): Logger {
  if (option !== undefined && isLogger(option)) return option;
  if (option === undefined && quietLogger !== undefined) return quietLogger;
  const logger = pino(
    {
      name: 'requeue',
      level: 'warn',
      ...redactingLoggerOptions(redactOptionsFromEnv().headers),
      ...option,
    },
    destination({ dest: 2, sync: true }),
  );
  if (option === undefined) quietLogger = logger;
  return logger;
}

function isLogger(option: LoggerOption): option is Logger {
  return typeof (option as Partial<Logger>).child === 'function';
}

/** `redis://user:secret@host` → `redis://user:***@host`, for messages and logs. */
export function maskUrl(url: string): string {
  try {
    new URL(url);
  } catch {
    return '[unparseable url]';
  }
  return redactUrl(url);
}
