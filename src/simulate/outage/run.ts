import type { Random } from '../../util/system.js';
import type { RetryPolicy } from '../../policy/retry-policy.js';
import { EventQueue } from '../event-queue.js';
import { policyFor, RetryDelays, streamRandom, type SimStrategy } from '../sim-strategy.js';
import { SlotDispatch } from './dispatch.js';
import { admitted, deadLetter, FleetGuards } from './guards.js';
import type { OutageParams, OutageResult } from './parameters.js';
import { seed004Delay } from './seed004-client.js';
import { OutageServer } from './server.js';
import { RunStats, second } from './stats.js';

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
  private readonly delays: RetryDelays;
  private readonly server: OutageServer;
  private readonly guards: FleetGuards;
  private readonly slots: SlotDispatch | undefined;
  private readonly stats: RunStats;
  private readonly seed004: boolean;
  // Clients, by index.
  private readonly seq: Int32Array;
  private readonly awaiting: Uint8Array;
  private readonly retries: Int32Array;
  private readonly attempts: Int32Array;
  private readonly previous: Float64Array;
  private readonly lastSleep: Float64Array;
  private readonly sentAt: Float64Array;
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
    this.delays = new RetryDelays(strategy, this.policy, this.backoff);
    this.server = new OutageServer(params.server, this.queue, check);
    this.guards = new FleetGuards(n, params.breaker, params.budget);
    this.slots = params.protect ? new SlotDispatch(params.protect) : undefined;
    this.stats = new RunStats(params.durationMs);
    this.seed004 = params.client === 'seed004';
    this.seq = new Int32Array(n);
    this.awaiting = new Uint8Array(n);
    this.retries = new Int32Array(n);
    this.attempts = new Int32Array(n);
    this.previous = new Float64Array(n).fill(NaN);
    this.lastSleep = new Float64Array(n);
    this.sentAt = new Float64Array(n);
  }

  run(): OutageResult {
    const { queue, params, server, stats } = this;
    for (let s = 0; s < stats.seconds; s++) queue.push(s * 1000, tick, s, 0);
    queue.push(params.stopAtMs, stop, 0, 0);
    queue.push(params.stopAtMs + params.stopForMs, resume, 0, 0);
    for (let client = 0; client < params.clients; client++) this.sleepGap(client, 0);
    while (queue.pop()) {
      const now = queue.time;
      if (now >= params.durationMs) break;
      switch (queue.kind) {
        case send:
          if (this.slots) {
            this.slots.wait(queue.a, this.retries[queue.a]! > 0);
            this.startWaiting(now);
          } else this.send(queue.a, now);
          break;
        case timeout:
          if (this.seq[queue.a] === queue.b && this.awaiting[queue.a] === 1) {
            this.awaiting[queue.a] = 0;
            stats.timeouts[second(now)]!++;
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
          stats.calls += server.resume(now);
          stats.noteConcurrency(server.concurrency, now);
          break;
        case tick:
          stats.concurrency[queue.a] = server.concurrency;
          break;
      }
    }
    return stats.result(this.strategy, params, queue.total, this.slots?.peakLimit);
  }

  /** A client's next request leaves, if the breaker lets it; false if it does not. */
  private send(client: number, now: number): boolean {
    const retryAt = this.guards.admit(client, this.seq[client]! + 1, now);
    if (retryAt !== admitted) {
      this.stats.errors[second(now)]!++;
      this.queue.push(retryAt, send, client, 0);
      return false;
    }
    const seq = this.seq[client]! + 1;
    this.seq[client] = seq;
    this.awaiting[client] = 1;
    this.attempts[client]!++;
    this.sentAt[client] = now;
    this.queue.push(now + this.params.timeoutMs, timeout, client, seq);
    if (this.server.arrive(client, seq, now)) {
      this.stats.calls++;
      if (this.server.running) this.stats.noteConcurrency(this.server.concurrency, now);
    }
    return true;
  }

  /** With `protect`: starts waiting clients while the adaptive limit has slots. */
  private startWaiting(now: number): void {
    const slots = this.slots!;
    for (let client = slots.next(); client >= 0; client = slots.next()) {
      if (this.send(client, now)) slots.started();
    }
  }

  private succeeded(client: number, now: number): void {
    this.stats.ok[second(now)]!++;
    this.guards.succeeded(client, this.attempts[client]!, now);
    this.restart(client, now);
    if (this.slots) {
      this.slots.succeeded(now - this.sentAt[client]!, now);
      this.startWaiting(now);
    }
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
      this.backoff,
    );
    if (delayMs === deadLetter) {
      this.stats.deadLettered++;
      this.restart(client, now);
    } else {
      this.retries[client] = retry + 1;
      this.previous[client] = delayMs;
      this.queue.push(now + delayMs, send, client, 0);
    }
    if (this.slots) {
      this.slots.failed(now - this.sentAt[client]!, now);
      this.startWaiting(now);
    }
  }

  /** The delay the client's rule wants before retry `retry`. */
  private wantedDelay(client: number, retry: number): number {
    if (!this.seed004) return this.delays.delay(retry, this.previous[client]!);
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
    const gap = -this.params.meanGapMs * Math.log(1 - this.gaps());
    this.lastSleep[client] = gap;
    this.queue.push(now + gap, send, client, 0);
  }
}
