import type { Logger } from '../config/logger.js';
import { judgeOffset, type ClockOffset } from '../policy/clock-offset.js';
import { measureClockOffset } from '../redis/clock-offset.js';
import type { RedisClient } from '../redis/connection.js';
import type { Clock } from '../util/system.js';

/** Options of {@link ClockWatch}. */
export interface ClockWatchOptions {
  redis: RedisClient;
  /** This process's clock, as given (uncorrected). */
  clock: Clock;
  logger: Logger;
  /** Past this skew (ms) the worker fetches nothing until its clock is back. */
  maxSkewMs: number;
  /** How often the offset is measured again (ms). */
  intervalMs: number;
  /** Told when fetching must stop (`true`) or may go on (`false`). */
  onRefuse: (refuse: boolean) => void;
}

/** What a worker knows of its clock, for metrics. */
export interface ClockStatus {
  /** Redis's clock minus this worker's (ms) at the last reading; `undefined` before one. */
  offsetMs: number | undefined;
  /** The round trip that reading was taken on: its error is at most half of it, plus 1.5 ms. */
  roundTripMs: number | undefined;
  /** The correction the worker's clock carries (ms). */
  correctionMs: number;
  /** Fetching is refused: the clock is past `maxSkewMs`. */
  refusing: boolean;
}

/**
 * A worker's clock on Redis's time: measures the offset from Redis's `TIME`
 * at start and every `intervalMs`, and corrects every reading of
 * {@link clock} by it, so that due times, start times and BullMQ's fetch
 * (which promotes delayed jobs up to the time it is given) all read Redis's
 * time. Warns past 1 s; past `maxSkewMs` it has the worker fetch nothing
 * (active jobs run on) until a reading is back within it.
 */
export class ClockWatch {
  /** The corrected clock: every reading is Redis's time as last measured. */
  readonly clock: Clock;
  private correctionMs = 0;
  private last: ClockOffset | undefined;
  private refusing = false;
  private timer: NodeJS.Timeout | undefined;
  private checking: Promise<void> | undefined;

  constructor(private readonly options: ClockWatchOptions) {
    const raw = options.clock;
    this.clock = { now: () => raw.now() + this.correctionMs };
  }

  /** What was last measured, and what is done about it. */
  status(): ClockStatus {
    return {
      offsetMs: this.last?.offsetMs,
      roundTripMs: this.last?.roundTripMs,
      correctionMs: this.correctionMs,
      refusing: this.refusing,
    };
  }

  /** Measures now (one measurement at a time); a Redis failure is logged and leaves all as it was. */
  check(): Promise<void> {
    this.checking ??= this.measure().finally(() => {
      this.checking = undefined;
    });
    return this.checking;
  }

  /** Measures every `intervalMs` from now on (an unref'd timer). */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.check(), this.options.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private async measure(): Promise<void> {
    const { redis, clock, logger, maxSkewMs } = this.options;
    let measured: ClockOffset;
    try {
      measured = await measureClockOffset(redis, clock);
    } catch (err) {
      logger.warn({ err }, "could not read Redis's clock; keeping the last correction");
      return;
    }
    this.last = measured;
    const judged = judgeOffset(measured, this.correctionMs, maxSkewMs);
    this.correctionMs = judged.correctionMs;
    const offsetMs = Math.round(measured.offsetMs);
    const fields = { offsetMs, roundTripMs: measured.roundTripMs, maxClockSkewMs: maxSkewMs };
    if (judged.warn)
      logger.warn(
        fields,
        `this worker's clock is ${Math.abs(offsetMs)} ms ${offsetMs < 0 ? 'ahead of' : 'behind'} ` +
          "Redis's: due times are read on Redis's clock; synchronise the clocks (NTP)",
      );
    if (judged.refuse !== this.refusing) {
      this.refusing = judged.refuse;
      if (judged.refuse)
        logger.warn(fields, 'clock skew past maxClockSkewMs: fetching no job until it is back');
      else logger.info(fields, 'clock skew back within maxClockSkewMs: fetching jobs again');
      this.options.onRefuse(judged.refuse);
    }
  }
}
