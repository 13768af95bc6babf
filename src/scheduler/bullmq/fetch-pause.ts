import type { Worker } from 'bullmq';
import type { Logger } from '../../config/logger.js';
import type { Clock } from '../../util/system.js';

/**
 * Stops a worker from fetching jobs while its queue's circuit is open, and
 * starts it again at the half-open time or when a transition says so. An
 * isolated circuit (`until` infinite) has no timer: only a close resumes.
 * A second hold, the clock's ({@link hold}), keeps fetching stopped on its
 * own: the worker fetches only when neither holds it. Active jobs run on.
 */
export class FetchPause {
  private breakerPaused = false;
  private clockHeld = false;
  private paused = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly worker: Worker,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  /** Stops fetching until `until` (ms since epoch), or until {@link resume}. */
  pause(until: number): void {
    this.clearTimer();
    this.breakerPaused = true;
    this.sync();
    if (Number.isFinite(until)) {
      this.timer = setTimeout(() => this.resume(), Math.max(0, until - this.clock.now()));
      this.timer.unref();
    }
  }

  resume(): void {
    this.clearTimer();
    this.breakerPaused = false;
    this.sync();
  }

  /** Stops fetching while this worker's clock is too far from Redis's, until {@link release}. */
  hold(): void {
    this.clockHeld = true;
    this.sync();
  }

  release(): void {
    this.clockHeld = false;
    this.sync();
  }

  /** Forgets any timer (on close). */
  stop(): void {
    this.clearTimer();
  }

  /** Pauses or resumes BullMQ's worker to match the holds (without waiting for active jobs). */
  private sync(): void {
    const hold = this.breakerPaused || this.clockHeld;
    if (hold && !this.paused) {
      this.paused = true;
      void this.worker.pause(true).catch((err) => this.logger.warn({ err }, 'could not pause'));
    } else if (!hold && this.paused && !this.worker.closing) {
      this.paused = false;
      this.worker.resume();
    }
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
