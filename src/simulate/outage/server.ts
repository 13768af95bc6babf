import type { EventQueue } from '../event-queue.js';
import { serverLatencyMs, type ServerModel } from '../server-model.js';

/** Requests in flight or queued at the server, oldest first: a growable ring of three arrays. */
export class ServerQueue {
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

/**
 * How long a connection the full backlog did not take keeps trying: the
 * kernel retries the SYN (1 s, 3 s, 7 s … for 127 s at Linux's
 * `tcp_syn_retries` 6) and Go keeps dialling after the request is cancelled,
 * up to its DefaultTransport's 30 s dial timeout. Such a connection lands
 * when the server resumes, if that is within this long of its first SYN.
 */
export const dialTimeoutMs = 30_000;

/** Called for each request the server answers: its client and the request's number. */
export type Answer = (client: number, seq: number, now: number) => void;

/**
 * Seed 004's server in virtual time: every request it accepts runs at once
 * (no limit on handlers), all of them slower as the concurrency grows, and
 * it finishes work whose client gave up. Stopped, it runs nothing and its
 * clock stands still; connections wait in its listen backlog, and those the
 * full backlog refused keep dialling and land at once on resume
 * ({@link dialTimeoutMs}). It asks the
 * agenda for a `checkKind` event when the oldest request's answer is due.
 */
export class OutageServer {
  readonly queue = new ServerQueue();
  running = true;
  private stoppedAt = 0;
  private pausedMs = 0;
  private backlogged = 0;
  private checkGeneration = 0;
  private checkAt = Infinity;
  // Connections dialling while the backlog is full.
  private dialing: number[] = [];

  constructor(
    private readonly model: ServerModel,
    private readonly agenda: EventQueue,
    private readonly checkKind: number,
  ) {}

  /** Requests being worked on (connections queued in a stopped server's backlog not counted). */
  get concurrency(): number {
    return this.running ? this.queue.length : this.queue.length - this.backlogged;
  }

  stop(now: number): void {
    this.running = false;
    this.stoppedAt = now;
    this.backlogged = 0;
    this.checkGeneration++;
    this.checkAt = Infinity;
  }

  /** Resumes: the backlog starts, then every connection still dialling lands; returns how many did. */
  resume(now: number): number {
    this.pausedMs += now - this.stoppedAt;
    this.running = true;
    this.backlogged = 0;
    const dialing = this.dialing;
    let landed = 0;
    for (let i = 0; i < dialing.length; i += 3) {
      if (now - dialing[i + 2]! > dialTimeoutMs) continue;
      this.queue.push(dialing[i]!, dialing[i + 1]!, now - this.pausedMs);
      landed++;
    }
    this.dialing = [];
    this.scheduleCheck(now);
    return landed;
  }

  /**
   * A request arrives: it starts or waits in the backlog (true), or meets a
   * full backlog and keeps dialling until the resume (false).
   */
  arrive(client: number, seq: number, now: number): boolean {
    if (this.running) {
      this.queue.push(client, seq, now - this.pausedMs);
      this.scheduleCheck(now);
      return true;
    }
    if (this.backlogged < this.model.backlog) {
      this.backlogged++;
      this.queue.push(client, seq, this.stoppedAt - this.pausedMs);
      return true;
    }
    this.dialing.push(client, seq, now);
    return false;
  }

  /** Whether a check event of `generation` is the one still wanted. */
  isCurrentCheck(generation: number): boolean {
    return generation === this.checkGeneration;
  }

  /** Answers every request whose time has come, oldest first, as the concurrency falls. */
  complete(now: number, answer: Answer): void {
    this.checkAt = Infinity;
    const queue = this.queue;
    const serverNow = now - this.pausedMs;
    while (queue.length > 0) {
      const due = queue.starts[queue.head]! + serverLatencyMs(queue.length, this.model);
      if (serverNow < due - 1e-6) break;
      const client = queue.clients[queue.head]!;
      const seq = queue.seqs[queue.head]!;
      queue.shift();
      answer(client, seq, now);
    }
    this.scheduleCheck(now);
  }

  /** Makes sure a check is due no later than the oldest request's answer. */
  private scheduleCheck(now: number): void {
    const queue = this.queue;
    if (!this.running || queue.length === 0) return;
    const due = queue.starts[queue.head]! + serverLatencyMs(queue.length, this.model);
    const at = now + Math.max(0, due - (now - this.pausedMs));
    // A check already due earlier will look again then; one due later must be replaced.
    if (at >= this.checkAt) return;
    this.checkAt = at;
    this.agenda.push(at, this.checkKind, 0, ++this.checkGeneration);
  }
}
