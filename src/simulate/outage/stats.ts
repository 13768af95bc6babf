import type { SimStrategy } from '../sim-strategy.js';
import type { OutageParams, OutageResult, SecondStats } from './parameters.js';
import {
  baselineOkPerSecond,
  recoverySecond,
  serverRecoverySecond,
  sinceResumeMs,
} from './recovery.js';

/** The second a virtual time falls in. */
export function second(ms: number): number {
  return Math.floor(ms / 1000);
}

/** A run's counts, second by second, and what it adds up to. */
export class RunStats {
  readonly seconds: number;
  readonly ok: Int32Array;
  readonly errors: Int32Array;
  readonly timeouts: Int32Array;
  readonly concurrency: Int32Array;
  peak = 0;
  calls = 0;
  deadLettered = 0;

  constructor(durationMs: number) {
    this.seconds = Math.ceil(durationMs / 1000);
    this.ok = new Int32Array(this.seconds);
    this.errors = new Int32Array(this.seconds);
    this.timeouts = new Int32Array(this.seconds);
    this.concurrency = new Int32Array(this.seconds);
  }

  /** Notes the server's concurrency `c` at `now`: the run's and the second's highest. */
  noteConcurrency(c: number, now: number): void {
    if (c > this.peak) this.peak = c;
    const s = second(now);
    if (s < this.seconds && c > this.concurrency[s]!) this.concurrency[s] = c;
  }

  /** The run's result: every second, the baseline and both recoveries. */
  result(
    strategy: SimStrategy,
    params: OutageParams,
    events: number,
    peakLimit: number | undefined,
  ): OutageResult {
    const perSecond: SecondStats[] = [];
    for (let t = 0; t < this.seconds; t++) {
      perSecond.push({
        t,
        ok: this.ok[t]!,
        errors: this.errors[t]!,
        timeouts: this.timeouts[t]!,
        concurrency: this.concurrency[t]!,
      });
    }
    const baseline = baselineOkPerSecond(perSecond, params);
    const recoveryMs = sinceResumeMs(recoverySecond(perSecond, params, baseline), params);
    const serverRecoveryMs = sinceResumeMs(serverRecoverySecond(perSecond, params), params);
    return {
      strategy,
      protected: params.protect !== undefined,
      recovered: recoveryMs !== null,
      recoveryMs,
      serverRecovered: serverRecoveryMs !== null,
      serverRecoveryMs,
      peakConcurrency: this.peak,
      perSecond,
      baselineOkPerSecond: baseline,
      calls: this.calls,
      deadLettered: this.deadLettered,
      events,
      ...(peakLimit === undefined ? {} : { peakLimit }),
    };
  }
}
