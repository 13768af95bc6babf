import type { Random } from '../../util/system.js';
import {
  admit,
  closedState,
  onProbeResult,
  onWindow,
  type BreakerState,
  type Step,
} from '../breaker/breaker.js';
import type { BreakerOptions } from '../breaker/breaker-options.js';
import { retryCost, successRefund, type BudgetOptions } from '../budget/budget-options.js';
import {
  emptyRatioBudget,
  ratioGeometry,
  settleRatio,
  takeRatio,
  type RatioBudgetState,
} from '../budget/ratio-budget.js';
import {
  fullBucket,
  refundTokens,
  takeTokens,
  type TokenBucketState,
} from '../budget/token-bucket.js';
import { applyEmptyBudget } from '../decide.js';
import type { RetryPolicy } from '../retry-policy.js';
import { addToWindow, emptyWindow, geometryFor, windowSums, type WindowHash } from '../window.js';
import { EventQueue } from './event-queue.js';
import { policyFor, retryDelay, streamRandom, type SimStrategy } from './sim-strategy.js';
import { serverLatencyMs, type ServerModel } from './server-model.js';
import { checkOutageWork } from './work-bound.js';

// The server's model has a file of its own; its names stay importable from here.
export { serverLatencyMs, type ServerModel } from './server-model.js';

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
}

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
  /**
   * Whether successes came back to ≥ 90 % of the pre-outage rate with the
   * concurrency at or under the limit for 10 s in a row before the run ended.
   */
  recovered: boolean;
  /** From the resume to the start of those 10 s; null if never. */
  recoveryMs: number | null;
  peakConcurrency: number;
  perSecond: SecondStats[];
  /** Successes per second before the outage (the reference for recovery). */
  baselineOkPerSecond: number;
  /** Requests that reached the server (queued ones included). */
  calls: number;
  /** Requests given up because the budget was empty and said `dead-letter`. */
  deadLettered: number;
  /** Events the simulator processed. */
  events: number;
}

/** How many seconds in a row must look healthy, and how healthy. */
export const recoveryWindowS = 10;
export const recoveryOkFraction = 0.9;

const send = 0;
const timeout = 1;
const check = 2;
const stop = 3;
const resume = 4;
const tick = 5;

/** Runs the outage scenario for each strategy. */
export function simulateOutage(
  strategies: readonly SimStrategy[],
  params: OutageParams,
): OutageResult[] {
  checkOutageWork(params, strategies.length);
  return strategies.map((strategy) => new OutageRun(strategy, params).run());
}

/** Requests in flight or queued at the server, oldest first: a growable ring of three arrays. */
class ServerQueue {
  clients = new Int32Array(1024);
  seqs = new Int32Array(1024);
  starts = new Float64Array(1024);
  head = 0;
  length = 0;

  push(client: number, seq: number, start: number): void {
    if (this.length === this.clients.length) this.grow();
    const i = (this.head + this.length) % this.clients.length;
    this.clients[i] = client;
    this.seqs[i] = seq;
    this.starts[i] = start;
    this.length++;
  }

  shift(): void {
    this.head = (this.head + 1) % this.clients.length;
    this.length--;
  }

  private grow(): void {
    const n = this.clients.length;
    const order = <T extends Int32Array | Float64Array>(old: T, next: T): T => {
      for (let k = 0; k < this.length; k++) next[k] = old[(this.head + k) % n]!;
      return next;
    };
    this.clients = order(this.clients, new Int32Array(2 * n));
    this.seqs = order(this.seqs, new Int32Array(2 * n));
    this.starts = order(this.starts, new Float64Array(2 * n));
    this.head = 0;
  }
}

class OutageRun {
  private readonly queue: EventQueue;
  private readonly policy: RetryPolicy;
  private readonly gaps: Random;
  private readonly backoff: Random;
  // Clients, by index.
  private readonly seq: Int32Array;
  private readonly awaiting: Uint8Array;
  private readonly retries: Int32Array;
  private readonly attempts: Int32Array;
  private readonly previous: Float64Array;
  private readonly lastCost: Float64Array;
  private readonly probes: (string | undefined)[];
  // The server.
  private readonly server = new ServerQueue();
  private running = true;
  private stoppedAt = 0;
  private pausedMs = 0;
  private backlogged = 0;
  private checkGeneration = 0;
  private checkAt = Infinity;
  // Seconds.
  private readonly seconds: number;
  private readonly ok: Int32Array;
  private readonly errors: Int32Array;
  private readonly timeouts: Int32Array;
  private readonly concurrency: Int32Array;
  private peak = 0;
  private calls = 0;
  private deadLettered = 0;
  // The fleet's breaker and budget.
  private breaker: BreakerState = closedState();
  private breakerWindow: WindowHash = emptyWindow;
  private failuresInRow = 0;
  private tokens: TokenBucketState | undefined;
  private ratio: RatioBudgetState = emptyRatioBudget;

  constructor(
    private readonly strategy: SimStrategy,
    private readonly params: OutageParams,
  ) {
    const n = params.clients;
    this.queue = new EventQueue(4 * n);
    this.policy = policyFor(params.policy, strategy);
    this.gaps = streamRandom(params.seed, strategy, 0, 0);
    this.backoff = streamRandom(params.seed, strategy, 0, 1);
    this.seq = new Int32Array(n);
    this.awaiting = new Uint8Array(n);
    this.retries = new Int32Array(n);
    this.attempts = new Int32Array(n);
    this.previous = new Float64Array(n).fill(NaN);
    this.lastCost = new Float64Array(n).fill(NaN);
    this.probes = new Array<string | undefined>(n).fill(undefined);
    this.seconds = Math.ceil(params.durationMs / 1000);
    this.ok = new Int32Array(this.seconds);
    this.errors = new Int32Array(this.seconds);
    this.timeouts = new Int32Array(this.seconds);
    this.concurrency = new Int32Array(this.seconds);
    if (params.budget?.kind === 'token-bucket') this.tokens = fullBucket(params.budget.capacity);
  }

  run(): OutageResult {
    const { queue, params } = this;
    for (let s = 0; s < this.seconds; s++) queue.push(s * 1000, tick, s, 0);
    queue.push(params.stopAtMs, stop, 0, 0);
    queue.push(params.stopAtMs + params.stopForMs, resume, 0, 0);
    for (let client = 0; client < params.clients; client++) queue.push(this.gap(), send, client, 0);
    while (queue.pop()) {
      const now = queue.time;
      if (now >= params.durationMs) break;
      switch (queue.kind) {
        case send:
          this.send(queue.a, now);
          break;
        case timeout:
          if (this.seq[queue.a] === queue.b && this.awaiting[queue.a] === 1) {
            this.awaiting[queue.a] = 0;
            this.timeouts[second(now)]!++;
            this.failed(queue.a, now);
          }
          break;
        case check:
          if (queue.b === this.checkGeneration) this.complete(now);
          break;
        case stop:
          this.running = false;
          this.stoppedAt = now;
          this.backlogged = 0;
          this.checkGeneration++;
          this.checkAt = Infinity;
          break;
        case resume:
          this.pausedMs += now - this.stoppedAt;
          this.running = true;
          this.backlogged = 0;
          this.noteConcurrency(now);
          this.scheduleCheck(now);
          break;
        case tick:
          this.concurrency[queue.a] = this.currentConcurrency();
          break;
      }
    }
    return this.result(queue.total);
  }

  /** A client's next request leaves, if the breaker lets it. */
  private send(client: number, now: number): void {
    const { breaker: options } = this.params;
    if (options && this.breaker.phase !== 'closed') {
      const step = admit(this.breaker, now, `${client}:${this.seq[client]! + 1}`, options);
      this.applyBreaker(step);
      const verdict = step.verdict;
      if (verdict.kind === 'reject') {
        // requeue defers the job to the time the breaker names; no attempt is used.
        this.errors[second(now)]!++;
        this.queue.push(verdict.retryAt, send, client, 0);
        return;
      }
      if (verdict.kind === 'probe') this.probes[client] = verdict.probeId;
    }
    const seq = this.seq[client]! + 1;
    this.seq[client] = seq;
    this.awaiting[client] = 1;
    this.attempts[client]!++;
    this.queue.push(now + this.params.timeoutMs, timeout, client, seq);
    this.arrive(client, seq, now);
  }

  /** A request reaches the server: it starts, waits in the backlog, or is not accepted. */
  private arrive(client: number, seq: number, now: number): void {
    if (this.running) {
      this.calls++;
      this.server.push(client, seq, now - this.pausedMs);
      this.noteConcurrency(now);
      this.scheduleCheck(now);
    } else if (this.backlogged < this.params.server.backlog) {
      this.calls++;
      this.backlogged++;
      this.server.push(client, seq, this.stoppedAt - this.pausedMs);
    }
  }

  /** Answers every request whose time has come, oldest first, as the concurrency falls. */
  private complete(now: number): void {
    this.checkAt = Infinity;
    const server = this.server;
    const serverNow = now - this.pausedMs;
    while (server.length > 0) {
      const due = server.starts[server.head]! + serverLatencyMs(server.length, this.params.server);
      if (serverNow < due - 1e-6) break;
      const client = server.clients[server.head]!;
      const seq = server.seqs[server.head]!;
      server.shift();
      // The server finishes work whose client gave up; only a waiting client hears back.
      if (this.seq[client] === seq && this.awaiting[client] === 1) {
        this.awaiting[client] = 0;
        this.succeeded(client, now);
      }
    }
    this.scheduleCheck(now);
  }

  /** Makes sure a check is due no later than the oldest request's answer. */
  private scheduleCheck(now: number): void {
    const server = this.server;
    if (!this.running || server.length === 0) return;
    const due = server.starts[server.head]! + serverLatencyMs(server.length, this.params.server);
    const at = now + Math.max(0, due - (now - this.pausedMs));
    // A check already due earlier will look again then; one due later must be replaced.
    if (at >= this.checkAt) return;
    this.checkAt = at;
    this.queue.push(at, check, 0, ++this.checkGeneration);
  }

  private succeeded(client: number, now: number): void {
    this.ok[second(now)]!++;
    this.breakerOutcome(client, true, now);
    const budget = this.params.budget;
    if (budget?.kind === 'token-bucket') {
      const cost = this.lastCost[client]!;
      const refund = successRefund(
        budget,
        this.attempts[client]!,
        Number.isNaN(cost) ? undefined : cost,
      );
      this.tokens = refundTokens(this.tokens!, refund, budget.capacity);
    } else if (budget?.kind === 'ratio') {
      this.ratio = settleRatio(this.ratio, 1, now, ratioGeometry(budget.windowMs));
    }
    this.restart(client, now);
  }

  /** A timed-out request: the breaker hears of it, the strategy (and budget) say when to retry. */
  private failed(client: number, now: number): void {
    this.breakerOutcome(client, false, now);
    const retry = this.retries[client]!;
    let delayMs = retryDelay(
      this.strategy,
      this.policy,
      retry,
      this.previous[client]!,
      this.backoff,
    );
    const budget = this.params.budget;
    if (budget) {
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
      if (!granted) {
        const decision = applyEmptyBudget(
          { action: 'retry', delayMs, retryAt: now + delayMs, source: 'strategy' },
          this.policy,
          now,
          budget.onEmpty,
        );
        if (decision.action === 'dead-letter') {
          this.deadLettered++;
          this.restart(client, now);
          return;
        }
        delayMs = decision.delayMs;
      }
    }
    this.retries[client] = retry + 1;
    this.previous[client] = delayMs;
    this.queue.push(now + delayMs, send, client, 0);
  }

  /** The request is over (answered or given up): the client's next one follows a random gap. */
  private restart(client: number, now: number): void {
    this.retries[client] = 0;
    this.attempts[client] = 0;
    this.previous[client] = NaN;
    this.lastCost[client] = NaN;
    this.queue.push(now + this.gap(), send, client, 0);
  }

  private breakerOutcome(client: number, success: boolean, now: number): void {
    const options = this.params.breaker;
    if (!options) return;
    const probeId = this.probes[client];
    if (probeId !== undefined) {
      this.probes[client] = undefined;
      this.applyBreaker(onProbeResult(this.breaker, probeId, success, now, options));
      return;
    }
    // As the store does: every outcome counts in the window; only a closed circuit trips on it.
    this.breakerWindow = addToWindow(
      this.breakerWindow,
      now,
      geometryFor(options.windowMs, options.buckets),
      success ? { t: 1 } : { t: 1, f: 1 },
    );
    this.failuresInRow = success ? 0 : this.failuresInRow + 1;
    const sums = windowSums(this.breakerWindow, now);
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
      this.breakerWindow = emptyWindow;
      this.failuresInRow = 0;
    }
  }

  private currentConcurrency(): number {
    return this.running ? this.server.length : this.server.length - this.backlogged;
  }

  private noteConcurrency(now: number): void {
    const c = this.currentConcurrency();
    if (c > this.peak) this.peak = c;
    const s = second(now);
    if (s < this.seconds && c > this.concurrency[s]!) this.concurrency[s] = c;
  }

  private gap(): number {
    return -this.params.meanGapMs * Math.log(1 - this.gaps());
  }

  private result(events: number): OutageResult {
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
    const { params } = this;
    const baseline = baselineOkPerSecond(perSecond, params);
    const recoveredAt = recoverySecond(perSecond, params, baseline);
    const resumeAt = params.stopAtMs + params.stopForMs;
    return {
      strategy: this.strategy,
      recovered: recoveredAt !== undefined,
      recoveryMs: recoveredAt === undefined ? null : Math.max(0, recoveredAt * 1000 - resumeAt),
      peakConcurrency: this.peak,
      perSecond,
      baselineOkPerSecond: baseline,
      calls: this.calls,
      deadLettered: this.deadLettered,
      events,
    };
  }
}

function second(ms: number): number {
  return Math.floor(ms / 1000);
}

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
