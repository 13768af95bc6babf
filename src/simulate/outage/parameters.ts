import type { BreakerOptions } from '../../policy/breaker/breaker-options.js';
import type { BudgetOptions } from '../../policy/budget/budget-options.js';
import type { RetryPolicy } from '../../policy/retry-policy.js';
import type { SimStrategy } from '../sim-strategy.js';
import type { ServerModel } from '../server-model.js';
import type { OutageProtection } from './dispatch.js';

/** The outage scenario's parameters. */
export interface OutageParams {
  /** Independent clients, ≥ 1. @defaultValue `1000` */
  clients: number;
  seed: number;
  /** Mean of a client's exponentially distributed gap between requests. @defaultValue `10_000` */
  meanGapMs: number;
  /** A client gives up waiting for an answer after this long. @defaultValue `2000` */
  timeoutMs: number;
  /** When the server is stopped. @defaultValue `15_000` */
  stopAtMs: number;
  /** For how long. @defaultValue `20_000` */
  stopForMs: number;
  /** The run's length. @defaultValue `180_000` */
  durationMs: number;
  server: ServerModel;
  /** Backoff options shared by every strategy (its `strategy` field is ignored). */
  policy: RetryPolicy;
  /** The fleet's circuit breaker (the workers' options), if any. */
  breaker?: BreakerOptions | undefined;
  /** The fleet's retry budget (the workers' options), if any. */
  budget?: BudgetOptions | undefined;
  /**
   * How a client picks its retry delay: `requeue` by the workers' strategy
   * functions (retry index 0 first, the chain starting at `baseMs`);
   * `seed004` by seed 004's client.go, exactly (see {@link seed004Delay}).
   * @defaultValue `'requeue'`
   */
  client?: OutageClient | undefined;
  /**
   * `--protect`: requeue's default protections besides the breaker and the
   * budget (give those too): an adaptive limit on the attempts in flight and
   * due retries first. Off when undefined.
   */
  protect?: OutageProtection | undefined;
}

/** The clients an outage can run. */
export const outageClients = ['requeue', 'seed004'] as const;
export type OutageClient = (typeof outageClients)[number];

/** The strategies seed 004's client has: `-exponential-backoff`, or its simple (fixed) delay. */
export const seed004Strategies = ['fixed', 'exponential'] as const;

/** One second of a run. */
export interface SecondStats {
  /** The second's start, in seconds from the run's start. */
  t: number;
  /** Requests answered in time. */
  ok: number;
  /** Requests the breaker refused without calling the server. */
  errors: number;
  /** Requests the client stopped waiting for. */
  timeouts: number;
  /** The highest server concurrency in the second (queued connections of a stopped server not counted). */
  concurrency: number;
}

/** One strategy's run. */
export interface OutageResult {
  strategy: SimStrategy;
  /** Whether the run had {@link OutageParams.protect}. */
  protected: boolean;
  /**
   * Whether the clients came back before the run ended: a window of 10 s
   * after the resume with the concurrency at or under the limit every second
   * and the successes ≥ 90 % of the pre-outage rate over the window, a
   * second's surplus paying for no other's shortfall (`recoverySecond`).
   */
  recovered: boolean;
  /** From the resume to the start of that window; null if never. */
  recoveryMs: number | null;
  /**
   * Whether the server itself came back: its concurrency at or under its
   * limit (so its latency at its floor) for {@link serverRecoveryWindowS}
   * seconds in a row after the resume, whatever the clients' rate.
   */
  serverRecovered: boolean;
  /** From the resume to the start of those seconds; null if never. */
  serverRecoveryMs: number | null;
  peakConcurrency: number;
  perSecond: SecondStats[];
  /** Successes per second before the outage, at most the offered rate (the reference for recovery). */
  baselineOkPerSecond: number;
  /** Requests that reached the server (queued ones included). */
  calls: number;
  /** Requests given up because the budget was empty and said `dead-letter`. */
  deadLettered: number;
  /** Events the simulator processed. */
  events: number;
  /** With `protect`: the highest the adaptive limit reached. */
  peakLimit?: number;
}

/** The recovery window's length, and the share of the baseline's successes it must have. */
export const recoveryWindowS = 10;
export const recoveryOkFraction = 0.9;
/** How many seconds in a row the server must look healthy. */
export const serverRecoveryWindowS = 5;
