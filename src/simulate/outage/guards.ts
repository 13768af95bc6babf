import type { Random } from '../../util/system.js';
import {
  admit,
  closedState,
  onProbeResult,
  onWindow,
  type BreakerState,
  type Step,
} from '../../policy/breaker/breaker.js';
import type { BreakerOptions } from '../../policy/breaker/breaker-options.js';
import {
  retryCost,
  successRefund,
  type BudgetOptions,
} from '../../policy/budget/budget-options.js';
import {
  emptyRatioBudget,
  ratioGeometry,
  settleRatio,
  takeRatio,
  type RatioBudgetState,
} from '../../policy/budget/ratio-budget.js';
import {
  fullBucket,
  refundTokens,
  takeTokens,
  type TokenBucketState,
} from '../../policy/budget/token-bucket.js';
import { applyEmptyBudget } from '../../policy/decide.js';
import type { RetryPolicy } from '../../policy/retry-policy.js';
import {
  addToWindow,
  emptyWindow,
  geometryFor,
  windowSums,
  type WindowHash,
} from '../../policy/window.js';

/** What {@link FleetGuards.admit} says: send now (`admitted`), or not before `retryAt`. */
export const admitted = -1;

/** What {@link FleetGuards.grantRetry} says when the budget dead-letters the request. */
export const deadLetter = -1;

/**
 * The fleet's circuit breaker and retry budget, one of each shared by every
 * client, run by the workers' own pure state machines (src/policy/breaker,
 * src/policy/budget) with the workers' parsed options. Either may be off.
 */
export class FleetGuards {
  private breaker: BreakerState = closedState();
  private window: WindowHash = emptyWindow;
  private failuresInRow = 0;
  private tokens: TokenBucketState | undefined;
  private ratio: RatioBudgetState = emptyRatioBudget;
  // Clients, by index.
  private readonly probes: (string | undefined)[];
  private readonly lastCost: Float64Array;

  constructor(
    clients: number,
    private readonly breakerOptions: BreakerOptions | undefined,
    private readonly budget: BudgetOptions | undefined,
  ) {
    this.probes = new Array<string | undefined>(clients).fill(undefined);
    this.lastCost = new Float64Array(clients).fill(NaN);
    if (budget?.kind === 'token-bucket') this.tokens = fullBucket(budget.capacity);
  }

  /**
   * Whether the breaker lets the client's request `seq` go: {@link admitted},
   * or the time it names to try again (requeue defers the job; no attempt is used).
   */
  admit(client: number, seq: number, now: number): number {
    const options = this.breakerOptions;
    if (!options || this.breaker.phase === 'closed') return admitted;
    const step = admit(this.breaker, now, `${client}:${seq}`, options);
    this.applyBreaker(step);
    const verdict = step.verdict;
    if (verdict.kind === 'reject') return verdict.retryAt;
    if (verdict.kind === 'probe') this.probes[client] = verdict.probeId;
    return admitted;
  }

  /** A request answered in time: the breaker hears of it, the budget refunds. */
  succeeded(client: number, attempts: number, now: number): void {
    this.outcome(client, true, now);
    const budget = this.budget;
    if (budget?.kind === 'token-bucket') {
      const cost = this.lastCost[client]!;
      const refund = successRefund(budget, attempts, Number.isNaN(cost) ? undefined : cost);
      this.tokens = refundTokens(this.tokens!, refund, budget.capacity);
    } else if (budget?.kind === 'ratio') {
      this.ratio = settleRatio(this.ratio, 1, now, ratioGeometry(budget.windowMs));
    }
    this.lastCost[client] = NaN;
  }

  /** A request timed out: the breaker hears of it. */
  timedOut(client: number, now: number): void {
    this.outcome(client, false, now);
  }

  /** Forgets the client's request (a new one starts from nothing). */
  reset(client: number): void {
    this.lastCost[client] = NaN;
  }

  /**
   * The delay the budget allows for a retry the strategy wants after
   * `delayMs`: the same, the policy's cap when the budget is empty, or
   * {@link deadLetter}.
   */
  grantRetry(
    client: number,
    delayMs: number,
    policy: RetryPolicy,
    now: number,
    random: Random,
  ): number {
    const budget = this.budget;
    if (!budget) return delayMs;
    let granted: boolean;
    if (budget.kind === 'token-bucket') {
      const cost = retryCost(budget, true);
      const take = takeTokens(this.tokens!, cost);
      this.tokens = take.state;
      granted = take.granted;
      // A denied take costs nothing, so its success refunds nothing either.
      this.lastCost[client] = granted ? cost : 0;
    } else {
      const geometry = ratioGeometry(budget.windowMs);
      const take = takeRatio(settleRatio(this.ratio, 1, now, geometry), now, budget, geometry);
      this.ratio = take.state;
      granted = take.granted;
    }
    if (granted) return delayMs;
    const decision = applyEmptyBudget(
      { kind: 'retry', delayMs, retryAt: now + delayMs, source: 'strategy' },
      policy,
      now,
      budget,
      random,
    );
    return decision.kind === 'dead-letter' ? deadLetter : decision.delayMs;
  }

  private outcome(client: number, success: boolean, now: number): void {
    const options = this.breakerOptions;
    if (!options) return;
    const probeId = this.probes[client];
    if (probeId !== undefined) {
      this.probes[client] = undefined;
      this.applyBreaker(onProbeResult(this.breaker, probeId, success, now, options));
      return;
    }
    // As the store does: every outcome counts in the window; only a closed circuit trips on it.
    this.window = addToWindow(
      this.window,
      now,
      geometryFor(options.windowMs, options.buckets),
      success ? { t: 1 } : { t: 1, f: 1 },
    );
    this.failuresInRow = success ? 0 : this.failuresInRow + 1;
    const sums = windowSums(this.window, now);
    const stats = {
      total: sums.t ?? 0,
      failures: sums.f ?? 0,
      consecutiveFailures: this.failuresInRow,
    };
    this.applyBreaker(onWindow(this.breaker, stats, now, options));
  }

  private applyBreaker(step: Step<unknown>): void {
    this.breaker = step.state;
    // Closing clears the window, as the store's compare-and-set does.
    if (step.transition === 'closed') {
      this.window = emptyWindow;
      this.failuresInRow = 0;
    }
  }
}
