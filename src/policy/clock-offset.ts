/**
 * How far a process's clock is from Redis's, and what a worker does about it:
 * one formula, used by `requeue doctor` and by every worker
 * (`src/redis/clock-offset.ts` takes the readings).
 */

/** One reading of Redis's `TIME` against this process's clock. */
export interface ClockSample {
  /** This process's clock (ms since the epoch) just before `TIME` was sent. */
  sentAt: number;
  /** How long `TIME` took to answer (ms, on a monotonic timer). */
  roundTripMs: number;
  /** `TIME`'s reply: seconds and microseconds. */
  redisTime: readonly [string | number, string | number];
}

/** Redis's clock minus this process's (ms), and the round trip it was measured on. */
export interface ClockOffset {
  offsetMs: number;
  roundTripMs: number;
}

/**
 * Redis's clock minus this process's, taking Redis to have read its clock
 * half-way through the round trip: wrong by at most half the round trip.
 */
export function offsetOf({ sentAt, roundTripMs, redisTime }: ClockSample): ClockOffset {
  const redisMs = Number(redisTime[0]) * 1000 + Number(redisTime[1]) / 1000;
  return { offsetMs: redisMs - (sentAt + roundTripMs / 2), roundTripMs };
}

/** The offset of the quickest round trip (the least uncertain). */
export function bestOffset(samples: readonly ClockSample[]): ClockOffset {
  let best: ClockOffset | undefined;
  for (const sample of samples) {
    const offset = offsetOf(sample);
    if (!best || offset.roundTripMs < best.roundTripMs) best = offset;
  }
  if (!best) throw new RangeError('bestOffset needs at least one sample');
  return best;
}

/** The least a clock may be off before it is certainly off: the measured offset less its uncertainty. */
export function certainSkewMs({ offsetMs, roundTripMs }: ClockOffset): number {
  return Math.max(0, Math.abs(offsetMs) - roundTripMs / 2);
}

/** A skew past this (ms) is logged as a warning by a worker. */
export const clockWarnMs = 1_000;

/** What a worker does after measuring its offset. */
export interface ClockJudgement {
  /**
   * The correction the worker's clock now carries (whole ms, added to every
   * reading): kept as it was while a new reading is within that reading's
   * uncertainty (plus the 1 ms of a millisecond clock), so the measurement's
   * noise never moves the clock (a retry's due time and its start are read
   * on the same corrected clock).
   */
  correctionMs: number;
  /** Past {@link clockWarnMs}. */
  warn: boolean;
  /** Past `maxSkewMs`: the worker fetches no job until a reading is back within it. */
  refuse: boolean;
}

/** Judges a reading `measured`, given the correction applied so far. */
export function judgeOffset(
  measured: ClockOffset,
  correctionMs: number,
  maxSkewMs: number,
): ClockJudgement {
  const noiseMs = measured.roundTripMs / 2 + 1;
  const skew = certainSkewMs(measured);
  return {
    correctionMs:
      Math.abs(measured.offsetMs - correctionMs) <= noiseMs
        ? correctionMs
        : Math.abs(measured.offsetMs) <= noiseMs
          ? 0
          : Math.round(measured.offsetMs),
    warn: skew > clockWarnMs,
    refuse: skew > maxSkewMs,
  };
}
