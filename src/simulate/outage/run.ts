import type { Random } from '../../util/system.js';
import type { RetryPolicy } from '../../policy/retry-policy.js';
import { EventQueue } from '../event-queue.js';
import { policyFor, retryDelay, streamRandom, type SimStrategy } from '../sim-strategy.js';
import { admitted, deadLetter, FleetGuards } from './guards.js';
import type { OutageParams, OutageResult, SecondStats } from './parameters.js';
import {
  baselineOkPerSecond,
  recoverySecond,
  serverRecoverySecond,
  sinceResumeMs,
} from './recovery.js';
import { seed004Delay } from './seed004-client.js';
import { OutageServer } from './server.js';

// The agenda's event kinds.
const send = 0;
const timeout = 1;
const check = 2;
const stop = 3;
const resume = 4;
const tick = 5;

/** One strategy's outage: closed-loop clients, the server, and the fleet's guards. */
export class OutageRun {
  private readonly queue: EventQueue;
  private readonly policy: RetryPolicy;
  private readonly gaps: Random;
  private readonly backoff: Random;
  private readonly server: OutageServer;
  private readonly guards: FleetGuards;
  // Clients, by index.
  private readonly seq: Int32Array;
  private readonly awaiting: Uint8Array;
  private readonly retries: Int32Array;
  private readonly attempts: Int32Array;
  private readonly previous: Float64Array;
  private readonly lastSleep: Float64Array;
  private readonly seed004: boolean;
  // Seconds.
  private readonly seconds: number;
  private readonly ok: Int32Array;
  private readonly errors: Int32Array;
  private readonly timeouts: Int32Array;
  private readonly concurrency: Int32Array;
  private peak = 0;
  private calls = 0;
  private deadLettered = 0;
  private readonly answer = (client: number, seq: number, now: number): void => {
    // The server finishes work whose client gave up; only a waiting client hears back.
    if (this.seq[client] === seq && this.awaiting[client] === 1) {
      this.awaiting[client] = 0;
      this.succeeded(client, now);
    }
  };

  constructor(
    private readonly strategy: SimStrategy,
    private readonly params: OutageParams,
  ) {
    const n = params.clients;
    this.queue = new EventQueue(4 * n);
    this.policy = policyFor(params.policy, strategy);
    this.gaps = streamRandom(params.seed, strategy, 0, 0);
    this.backoff = streamRandom(params.seed, strategy, 0, 1);
    this.server = new OutageServer(params.server, this.queue, check);
    this.guards = new FleetGuards(n, params.breaker, params.budget);
    this.seq = new Int32Array(n);
    this.awaiting = new Uint8Array(n);
    this.retries = new Int32Array(n);
    this.attempts = new Int32Array(n);
    this.previous = new Float64Array(n).fill(NaN);
    this.lastSleep = new Float64Array(n);
    this.seed004 = params.client === 'seed004';
    this.seconds = Math.ceil(params.durationMs / 1000);
    this.ok = new Int32Array(this.seconds);
    this.errors = new Int32Array(this.seconds);
    this.timeouts = new Int32Array(this.seconds);
    this.concurrency = new Int32Array(this.seconds);
  }

  run(): OutageResult {
    const { queue, params, server } = this;
    for (let s = 0; s < this.seconds; s++) queue.push(s * 1000, tick, s, 0);
    queue.push(params.stopAtMs, stop, 0, 0);
    queue.push(params.stopAtMs + params.stopForMs, resume, 0, 0);
    for (let client = 0; client < params.clients; client++) this.sleepGap(client, 0);
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
          if (server.isCurrentCheck(queue.b)) server.complete(now, this.answer);
          break;
        case stop:
          server.stop(now);
          break;
        case resume:
          this.calls += server.resume(now);
          this.noteConcurrency(now);
          break;
        case tick:
          this.concurrency[queue.a] = server.concurrency;
          break;
      }
    }
    return this.result(queue.total);
  }

  /** A client's next request leaves, if the breaker lets it. */
  private send(client: number, now: number): void {
    const retryAt = this.guards.admit(client, this.seq[client]! + 1, now);
    if (retryAt !== admitted) {
      this.errors[second(now)]!++;
      this.queue.push(retryAt, send, client, 0);
      return;
    }
    const seq = this.seq[client]! + 1;
    this.seq[client] = seq;
    this.awaiting[client] = 1;
    this.attempts[client]!++;
    this.queue.push(now + this.params.timeoutMs, timeout, client, seq);
    if (this.server.arrive(client, seq, now)) {
      this.calls++;
      if (this.server.running) this.noteConcurrency(now);
    }
  }

  private succeeded(client: number, now: number): void {
    this.ok[second(now)]!++;
    this.guards.succeeded(client, this.attempts[client]!, now);
    this.restart(client, now);
  }

  /** A timed-out request: the breaker hears of it, the strategy (and budget) say when to retry. */
  private failed(client: number, now: number): void {
    this.guards.timedOut(client, now);
    const retry = this.retries[client]!;
    const delayMs = this.guards.grantRetry(
      client,
      this.wantedDelay(client, retry),
      this.policy,
      now,
    );
    if (delayMs === deadLetter) {
      this.deadLettered++;
      this.restart(client, now);
      return;
    }
    this.retries[client] = retry + 1;
    this.previous[client] = delayMs;
    this.queue.push(now + delayMs, send, client, 0);
  }

  /** The delay the client's rule wants before retry `retry`. */
  private wantedDelay(client: number, retry: number): number {
    if (!this.seed004)
      return retryDelay(this.strategy, this.policy, retry, this.previous[client]!, this.backoff);
    const raw = seed004Delay(this.strategy, this.policy, this.lastSleep[client]!, this.backoff);
    this.lastSleep[client] = raw;
    return Math.max(0, raw);
  }

  /** The request is over (answered or given up): the client's next one follows a random gap. */
  private restart(client: number, now: number): void {
    this.retries[client] = 0;
    this.attempts[client] = 0;
    this.previous[client] = NaN;
    this.guards.reset(client);
    this.sleepGap(client, now);
  }

  /** The client thinks for a random gap, then sends (seed 004's client remembers the gap). */
  private sleepGap(client: number, now: number): void {
    const gap = this.gap();
    this.lastSleep[client] = gap;
    this.queue.push(now + gap, send, client, 0);
  }

  private noteConcurrency(now: number): void {
    const c = this.server.concurrency;
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
    const recoveryMs = sinceResumeMs(recoverySecond(perSecond, params, baseline), params);
    const serverRecoveryMs = sinceResumeMs(serverRecoverySecond(perSecond, params), params);
    return {
      strategy: this.strategy,
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
    };
  }
}

function second(ms: number): number {
  return Math.floor(ms / 1000);
}
