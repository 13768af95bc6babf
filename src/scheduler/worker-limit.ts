import type { LimitSignal } from '../policy/limit/aimd.js';
import type { ConcurrencyLimitOptions } from '../policy/limit/gradient-options.js';
import {
  initialGradient,
  stepGradient,
  type MutableGradientState,
} from '../policy/limit/gradient.js';
import type { AttemptOutcome } from '../policy/outcome.js';

/** Death reasons of a retryable failure that ran out of tries: they speak of overload too. */
const exhausted = new Set(['max-attempts', 'max-elapsed', 'budget-exhausted']);

/** What an attempt's outcome says of the dependency: `neutral` for a permanent error or a deferral. */
export function attemptSignal(outcome: AttemptOutcome | undefined): LimitSignal {
  if (outcome === undefined || outcome.kind === 'deferred') return 'neutral';
  if (outcome.kind === 'completed') return 'success';
  if (outcome.kind === 'retry') return 'overload';
  return exhausted.has(outcome.death.reason) ? 'overload' : 'neutral';
}

/**
 * The worker's own concurrency limit (`concurrencyLimit`), learned from its
 * attempts' latency by the gradient rule (`src/policy/limit/gradient.ts`)
 * and applied as BullMQ's concurrency, so the worker fetches no more than
 * the limit: jobs over it wait in the queue, not in a deferral. In memory,
 * no Redis: nothing is paid per job but a few arithmetic operations, on a
 * state it owns and updates in place (no object per attempt), and BullMQ's
 * `concurrency` is set only when its integer changes.
 */
export class WorkerLimit {
  private readonly state: MutableGradientState;
  private inFlight = 0;
  /** What BullMQ's `concurrency` was last set to (its setter is not called again for the same). */
  private admitted: number;

  constructor(
    private readonly target: { concurrency: number },
    private readonly options: ConcurrencyLimitOptions,
    /** The worker's `concurrency`: the limit never exceeds it. */
    private readonly ceiling: number,
  ) {
    this.state = { ...initialGradient(options, ceiling) };
    this.admitted = Math.floor(this.state.limit);
    this.target.concurrency = this.admitted;
  }

  /** The limit now (fractional; the worker runs its floor at once). */
  get limit(): number {
    return this.state.limit;
  }

  /** An attempt's handler starts. */
  started(): void {
    this.inFlight++;
  }

  /** An attempt that {@link started} is over after `latencyMs`, its outcome saying `signal`. */
  finished(latencyMs: number, signal: LimitSignal, now: number): void {
    stepGradient(this.state, signal, latencyMs, this.inFlight, now, this.options, this.ceiling);
    this.inFlight--;
    const admitted = Math.floor(this.state.limit);
    if (admitted !== this.admitted) this.target.concurrency = this.admitted = admitted;
  }
}

/** The worker's limit, unless it is off or its `concurrency` leaves nothing to limit. */
export function workerLimit(
  target: { concurrency: number },
  options: ConcurrencyLimitOptions | undefined,
  concurrency: number,
): WorkerLimit | undefined {
  if (options === undefined || concurrency <= options.floor) return undefined;
  return new WorkerLimit(target, options, concurrency);
}
