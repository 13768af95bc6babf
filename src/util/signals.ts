import { constants } from 'node:os';
import type { Logger } from 'pino';
import { startedByNpm, watchParent } from './parent-watch.js';
import { systemClock, type Clock } from './system.js';

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

/**
 * What is left of a process's shutdown, measured from its signal: every step
 * of a close takes `left()` as its timeout, so the steps together never
 * outlast the one deadline.
 */
export interface ShutdownBudget {
  /** The whole shutdown timeout, in ms. */
  readonly timeoutMs: number;
  /** Milliseconds until the process exits whatever is still running (never negative). */
  left(): number;
}

/** A budget of `timeoutMs` that starts now. */
export function shutdownBudget(timeoutMs: number, clock: Clock = systemClock): ShutdownBudget {
  const deadline = clock.now() + timeoutMs;
  return { timeoutMs, left: () => Math.max(0, deadline - clock.now()) };
}

/** Steps a process runs right before a shutdown's exit. */
const exitSteps: ((timeoutMs: number) => Promise<void> | void)[] = [];

/**
 * Registers a step to run right before {@link closeOnSignal} exits, given at
 * most `timeoutMs` (e.g. flushing the log lines a stalled stdout reader has
 * not taken: unbounded, it would hold the exit for ever).
 */
export function beforeShutdownExit(step: (timeoutMs: number) => Promise<void> | void): void {
  exitSteps.push(step);
}

/** The last moment's time to flush what is buffered, in ms, when the deadline itself has come. */
const lastFlushMs = 50;

/**
 * What a process keeps of its shutdown timeout for the exit itself (the last
 * flush of its log lines, then the runtime's teardown, up to ~250 ms on a
 * loaded 2-core machine), so that it is *gone* within the timeout rather than
 * starting to exit at it: a fifth of the timeout, at most 250 ms. The close
 * gets the rest.
 */
export function exitReserveMs(timeoutMs: number): number {
  return Math.min(250, Math.floor(Math.max(0, timeoutMs) / 5));
}

/** Runs the registered steps, each bounded by `timeoutMs`, then exits with `code`. */
async function exitWithin(timeoutMs: number, code: number): Promise<never> {
  for (const step of exitSteps) {
    try {
      await step(timeoutMs);
    } catch {
      // An exit step must not stop the exit.
    }
  }
  return process.exit(code);
}

/** Options of {@link closeOnSignal}. */
export interface CloseOnSignalOptions {
  /** The process's shutdown timeout, from the signal to the exit, in ms. */
  timeoutMs: number;
  /** Closes what the process runs, each step within `budget.left()`. */
  close: (budget: ShutdownBudget) => Promise<unknown>;
  logger: Pick<Logger, 'info' | 'warn' | 'error'>;
  /**
   * What an early exit leaves behind, for its log line.
   * @defaultValue `'active jobs are left to stalled recovery'`
   */
  leftBehind?: string;
  /** @defaultValue the system clock */
  clock?: Clock;
  /**
   * Also drain and exit when the parent process exits, as on SIGTERM:
   * `npx requeue worker … &` then `kill $!` ends npm, not node.
   * @defaultValue `true` when npm started the process ({@link startedByNpm})
   */
  exitWithParent?: boolean;
}

/** What started a shutdown: a signal, or the parent's exit. */
export type StopCause = NodeJS.Signals | 'parent-exited';

/** Resolves on the first SIGTERM or SIGINT or, when `withParent`, when the parent exits. */
async function waitForStop(withParent: boolean): Promise<StopCause> {
  if (!withParent) return waitForSignal();
  const parent = watchParent();
  const cause = await Promise.race([
    waitForSignal(),
    parent.gone.then(() => 'parent-exited' as const),
  ]);
  parent.stop();
  return cause;
}

/**
 * Waits for SIGTERM or SIGINT (or, started by npm, its parent's exit),
 * closes what the process runs and exits: the
 * one owner of a process's shutdown deadline. The budget is measured from
 * the signal and is the timeout less {@link exitReserveMs} (kept for the exit
 * itself, so the process is gone within its timeout); `close` gets it and
 * gives each step what is left; the process exits as soon as `close` returns
 * (a handler's timer or connection, not ours to close, must not hold it) and,
 * if `close` has not returned by then, when the budget ends; the log lines
 * still buffered get what is left of it, or a moment. A second signal exits at once. Jobs still active
 * are not lost: their locks expire and stalled recovery hands them to another
 * worker.
 */
export async function closeOnSignal(options: CloseOnSignalOptions): Promise<never> {
  const { timeoutMs, close, logger, clock = systemClock } = options;
  const leftBehind = options.leftBehind ?? 'active jobs are left to stalled recovery';
  const signal = await waitForStop(options.exitWithParent ?? startedByNpm());
  const reserveMs = exitReserveMs(timeoutMs);
  const budget = shutdownBudget(timeoutMs - reserveMs, clock);
  logger.info({ signal, shutdownTimeoutMs: timeoutMs }, 'draining');
  const hardExit = setTimeout(() => {
    logger.error({ shutdownTimeoutMs: timeoutMs }, `shutdown timed out; exiting, ${leftBehind}`);
    void exitWithin(lastFlushMs, 1);
  }, timeoutMs - reserveMs);
  hardExit.unref();
  const again = (second: NodeJS.Signals): void => {
    logger.warn({ signal: second }, `second signal; exiting now, ${leftBehind}`);
    void exitWithin(0, 128 + (constants.signals[second] ?? 0));
  };
  process.once('SIGTERM', again);
  process.once('SIGINT', again);
  let code = 0;
  try {
    await close(budget);
    logger.info({ signal }, 'stopped');
  } catch (err) {
    logger.error({ err }, `shutdown failed; exiting, ${leftBehind}`);
    code = 1;
  }
  // Nothing of ours is still open; the logs get what is left (a moment at least).
  return exitWithin(Math.max(budget.left(), lastFlushMs), code);
}
