import {
  recoveryOkFraction,
  recoveryWindowS,
  serverRecoveryWindowS,
  type OutageParams,
  type SecondStats,
} from './parameters.js';

/**
 * What a healthy server answers per second on average: every client sends,
 * waits the server's floor latency, then thinks a mean gap.
 */
export function offeredOkPerSecond(params: OutageParams): number {
  return (params.clients * 1000) / (params.meanGapMs + params.server.minDelayMs);
}

/**
 * Successes per second before the outage, the reference for recovery: the
 * mean over the whole seconds before the stop, the first left out (clients
 * are still starting), but never above {@link offeredOkPerSecond} — a healthy
 * server cannot do better on average, so a measured mean above it is noise
 * that would raise the bar (six seconds of ~100 ok/s are ±4 %); the offered
 * rate itself when the stop comes too early to measure.
 */
export function baselineOkPerSecond(
  perSecond: readonly SecondStats[],
  params: OutageParams,
): number {
  const offered = offeredOkPerSecond(params);
  const end = Math.min(perSecond.length, Math.floor(params.stopAtMs / 1000));
  const start = end >= 2 ? 1 : 0;
  if (end <= start) return offered;
  let sum = 0;
  for (let t = start; t < end; t++) sum += perSecond[t]!.ok;
  return Math.min(sum / (end - start), offered);
}

/**
 * The first second, at or after the resume, that starts a window of
 * {@link recoveryWindowS} seconds in which the concurrency stays at or under
 * the limit every second and the successes fall short of the baseline by at
 * most 1 − {@link recoveryOkFraction} of the window's baseline in all:
 * Σ min(ok, baseline) ≥ fraction × window × baseline. A second's surplus (the
 * burst of parked retries) pays for no other second's shortfall. Judged over
 * the window, not second by second: a healthy server's ok/s is Poisson-like
 * (~100 ± 10), so "every second ≥ 90 %" fails one that was never stopped in
 * about a third of runs. Undefined if the run ends first.
 */
export function recoverySecond(
  perSecond: readonly SecondStats[],
  params: OutageParams,
  baseline: number,
): number | undefined {
  const first = Math.ceil((params.stopAtMs + params.stopForMs) / 1000);
  const needed = recoveryOkFraction * recoveryWindowS * baseline;
  for (let t = first; t + recoveryWindowS <= perSecond.length; t++) {
    let credited = 0;
    let over = -1;
    for (let k = t; k < t + recoveryWindowS && over < 0; k++) {
      const s = perSecond[k]!;
      if (s.concurrency > params.server.concurrencyLimit) over = k;
      credited += Math.min(s.ok, baseline);
    }
    if (over >= 0)
      t = over; // no window holding that second can pass
    else if (credited >= needed) return t;
  }
  return undefined;
}

/**
 * The first second, at or after the resume, that starts
 * {@link serverRecoveryWindowS} seconds in a row with the server's
 * concurrency at or under its limit: its latency is then at its floor
 * (`minDelayMs`), whether or not the clients have come back; undefined if
 * the run ends first.
 */
export function serverRecoverySecond(
  perSecond: readonly SecondStats[],
  params: OutageParams,
): number | undefined {
  const first = Math.ceil((params.stopAtMs + params.stopForMs) / 1000);
  let streak = 0;
  for (let t = first; t < perSecond.length; t++) {
    streak = perSecond[t]!.concurrency <= params.server.concurrencyLimit ? streak + 1 : 0;
    if (streak === serverRecoveryWindowS) return t - serverRecoveryWindowS + 1;
  }
  return undefined;
}

/** Milliseconds from the resume to the start of `second`, never negative; null for never. */
export function sinceResumeMs(second: number | undefined, params: OutageParams): number | null {
  if (second === undefined) return null;
  return Math.max(0, second * 1000 - (params.stopAtMs + params.stopForMs));
}
