import type { Logger } from '../../config/logger.js';
import type { Clock } from '../../util/system.js';
import type { RetentionPass } from './retention-pass.js';

/** A timer that can be cancelled. */
export interface Timer {
  cancel(): void;
}

/** Calls `fn` once after `ms`; the default is `setTimeout`, unref'd. */
export type SetTimer = (fn: () => void, ms: number) => Timer;

/** `setTimeout`, unref'd: a pending retention pass never holds the process. */
export const unrefTimer: SetTimer = (fn, ms) => {
  const timer = setTimeout(fn, ms);
  timer.unref();
  return { cancel: () => clearTimeout(timer) };
};

/** What a {@link RetentionKeeper} needs. */
export interface RetentionKeeperOptions {
  /** One retention pass (see `runRetentionPass`). */
  pass: (signal: AbortSignal) => Promise<RetentionPass>;
  clock: Clock;
  logger: Logger;
  /** Between passes while no job dies. */
  intervalMs: number;
  /** At most one pass per this while jobs die; the last death is followed by one within it. @defaultValue `1_000` */
  settleMs?: number;
  setTimer?: SetTimer;
}

/**
 * Applies a worker's DLQ retention on time: a pass at start, one within
 * `settleMs` of a death (at most one per `settleMs` while jobs die, and
 * always one after the last), and one every `intervalMs` anyway, so age
 * limits hold with no deaths at all. One timer, one pass at a time in this
 * process; the fleet-wide exclusion is the pass's own lock. Before, a pass
 * ran only on a death at least a second after the previous pass, so the
 * tail of a burst stayed past `maxCount` until the next death.
 */
export class RetentionKeeper {
  private timer: Timer | undefined;
  private dueAt = Number.POSITIVE_INFINITY;
  private armedMs = 0;
  private running: Promise<void> | undefined;
  /** A job died while a pass ran: the pass may have missed it. */
  private dirty = false;
  private lastStart = Number.NEGATIVE_INFINITY;
  private stopped = false;
  private readonly abort = new AbortController();
  private readonly settleMs: number;
  private readonly setTimer: SetTimer;

  constructor(private readonly options: RetentionKeeperOptions) {
    this.settleMs = options.settleMs ?? 1_000;
    this.setTimer = options.setTimer ?? unrefTimer;
  }

  /** Starts: a pass now, then the periodic ones. */
  start(): void {
    this.schedule(this.options.clock.now());
  }

  /** A job died: a pass follows within `settleMs`. */
  noteDeath(): void {
    if (this.running) {
      this.dirty = true;
      return;
    }
    this.schedule(Math.max(this.options.clock.now(), this.lastStart + this.settleMs));
  }

  /**
   * Stops: no pass starts any more; the running one ends after its current
   * batch. Resolves when it has (callers bound the wait with their deadline).
   */
  stop(): Promise<void> {
    this.stopped = true;
    this.timer?.cancel();
    this.timer = undefined;
    this.abort.abort();
    return this.running ?? Promise.resolve();
  }

  /** Whether a pass is due or running: for tests. */
  get pending(): boolean {
    return this.timer !== undefined || this.running !== undefined;
  }

  private schedule(at: number): void {
    if (this.stopped) return;
    const now = this.options.clock.now();
    // The clock says when a pass is due: an armed timer is kept if it is due no
    // later, unless the clock has passed its time while it still waits.
    if (this.timer && this.dueAt <= at && (this.dueAt > now || this.armedMs === 0)) return;
    this.timer?.cancel();
    this.dueAt = at;
    this.armedMs = Math.max(0, at - now);
    this.timer = this.setTimer(() => this.fire(), this.armedMs);
  }

  private fire(): void {
    this.timer = undefined;
    this.dueAt = Number.POSITIVE_INFINITY;
    if (this.stopped || this.running) return;
    const { clock, logger } = this.options;
    this.lastStart = clock.now();
    this.dirty = false;
    this.running = this.options
      .pass(this.abort.signal)
      .then(
        (outcome) =>
          // Another pass held the lock, or a job died meanwhile: either may have missed a death.
          outcome.kind === 'busy' || this.dirty
            ? Math.max(clock.now(), this.lastStart + this.settleMs)
            : clock.now() + this.options.intervalMs,
        (err: unknown) => {
          logger.warn({ err }, 'could not apply the DLQ retention; trying again later');
          return clock.now() + this.options.intervalMs;
        },
      )
      .then((next) => {
        this.running = undefined;
        this.schedule(next);
      });
  }
}
