import type { Worker } from 'bullmq';
import type { Logger } from '../config/logger.js';
import type { Clock } from '../util/system.js';

/**
 * Stops a worker from fetching jobs while its queue's circuit is open, and
 * starts it again at the half-open time or when a transition says so. An
 * isolated circuit (`until` infinite) has no timer: only a close resumes.
 */
export class FetchPause {
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
    if (!this.paused) {
      this.paused = true;
      void this.worker.pause(true).catch((err) => this.logger.warn({ err }, 'could not pause'));
    }
    if (Number.isFinite(until)) {
      this.timer = setTimeout(() => this.resume(), Math.max(0, until - this.clock.now()));
      this.timer.unref();
    }
  }

  resume(): void {
    this.clearTimer();
    if (!this.paused || this.worker.closing) return;
    this.paused = false;
    this.worker.resume();
  }

  /** Forgets any timer (on close). */
  stop(): void {
    this.clearTimer();
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
