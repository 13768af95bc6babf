import {
  recoveryOkFraction,
  recoveryWindowS,
  serverRecoveryWindowS,
  type OutageParams,
  type SecondStats,
} from './parameters.js';

/**
 * Successes per second before the outage: the whole seconds before the stop,
 * the first left out (clients are still starting); the offered load when
 * the stop comes too early to measure.
 */
export function baselineOkPerSecond(
  perSecond: readonly SecondStats[],
  params: OutageParams,
): number {
  const end = Math.min(perSecond.length, Math.floor(params.stopAtMs / 1000));
  const start = end >= 2 ? 1 : 0;
  if (end <= start) return (params.clients * 1000) / params.meanGapMs;
  let sum = 0;
  for (let t = start; t < end; t++) sum += perSecond[t]!.ok;
  return sum / (end - start);
}

/**
 * The first second, at or after the resume, that starts
 * {@link recoveryWindowS} seconds in a row with successes at or above
 * {@link recoveryOkFraction} of the baseline and the concurrency at or under
 * the limit; undefined if the run ends first.
 */
export function recoverySecond(
  perSecond: readonly SecondStats[],
  params: OutageParams,
  baseline: number,
): number | undefined {
  const first = Math.ceil((params.stopAtMs + params.stopForMs) / 1000);
  let streak = 0;
  for (let t = first; t < perSecond.length; t++) {
    const s = perSecond[t]!;
    const healthy =
      s.ok >= recoveryOkFraction * baseline && s.concurrency <= params.server.concurrencyLimit;
    streak = healthy ? streak + 1 : 0;
    if (streak === recoveryWindowS) return t - recoveryWindowS + 1;
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
