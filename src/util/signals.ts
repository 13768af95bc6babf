import { constants } from 'node:os';
import type { Logger } from 'pino';

/** Resolves on the first SIGTERM or SIGINT: when a process should drain and stop. */
export function waitForSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const on = (signal: NodeJS.Signals): void => {
      process.off('SIGTERM', on);
      process.off('SIGINT', on);
      resolve(signal);
    };
    process.on('SIGTERM', on);
    process.on('SIGINT', on);
  });
}

/** Options of {@link closeOnSignal}. */
export interface CloseOnSignalOptions {
  /** The process's shutdown timeout: how long `close` may take. */
  timeoutMs: number;
  /** Closes what the process runs, given {@link CloseOnSignalOptions.timeoutMs}. */
  close: () => Promise<unknown>;
  logger: Pick<Logger, 'info' | 'warn' | 'error'>;
  /**
   * What an early exit leaves behind, for its log line.
   * @defaultValue `'active jobs are left to stalled recovery'`
   */
  leftBehind?: string;
  /** How long past `timeoutMs` the process may live if `close` never returns. @defaultValue `1500` */
  marginMs?: number;
  /**
   * How long, once `close` has returned, something the process did not open
   * (a handler's connection or timer) may keep it alive. @defaultValue `1000`
   */
  lingerMs?: number;
}

/**
 * Waits for SIGTERM or SIGINT, then closes what the process runs, with a
 * deadline that holds whatever handlers or Redis do: an unref'd timer ends
 * the process `marginMs` after `timeoutMs` if `close` has not returned, and a
 * second signal ends it at once. Jobs still active are not lost: their locks
 * expire and stalled recovery hands them to another worker.
 */
export async function closeOnSignal(options: CloseOnSignalOptions): Promise<NodeJS.Signals> {
  const {
    timeoutMs,
    close,
    logger,
    leftBehind = 'active jobs are left to stalled recovery',
    marginMs = 1500,
    lingerMs = 1000,
  } = options;
  const signal = await waitForSignal();
  logger.info({ signal, shutdownTimeoutMs: timeoutMs }, 'draining');
  const hardExit = setTimeout(() => {
    logger.error({ shutdownTimeoutMs: timeoutMs }, `shutdown timed out; exiting, ${leftBehind}`);
    process.exit(1);
  }, timeoutMs + marginMs);
  hardExit.unref();
  const again = (second: NodeJS.Signals): void => {
    logger.warn({ signal: second }, `second signal; exiting now, ${leftBehind}`);
    process.exit(128 + (constants.signals[second] ?? 0));
  };
  process.once('SIGTERM', again);
  process.once('SIGINT', again);
  try {
    await close();
  } finally {
    clearTimeout(hardExit);
    process.off('SIGTERM', again);
    process.off('SIGINT', again);
    // Connections a handler module opened are not ours to close; they must not hold the process.
    setTimeout(() => process.exit(), lingerMs).unref();
  }
  return signal;
}
