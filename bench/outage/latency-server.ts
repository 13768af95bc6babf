import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import type { ServerModel } from '../../src/simulate/outage.js';

/** What the server saw, per second of the run. */
export interface ServerSeconds {
  /** The highest number of requests in flight in each second (a stopped server's backlog not counted). */
  concurrency: Int32Array;
  /** Requests whose work finished after their client had gone (answered to nobody). */
  abandoned: number;
  /** Requests that reached the server, backlogged ones included. */
  calls: number;
  /** Requests a stopped server neither queued nor answered (backlog full). */
  refused: number;
  peak: number;
  /** The server thread's event-loop delay over the run, ms. */
  loopDelayMs: { p99: number; max: number };
  /** With `trace`: each arrival (+ms since second 0) and each answer (−ms), in order. */
  trace?: number[];
  /** With `trace`: per check that answered something, [when (ms since second 0), how late its timer fired (ms)]. */
  timerLate?: number[][];
}

/** setTimeout's longest delay (2³¹ − 1 ms); a longer one fires at once. */
const maxTimerMs = 2 ** 31 - 1;

interface Work {
  res: ServerResponse;
  /** When the work started, in server time (the pauses left out). */
  start: number;
}

/**
 * An HTTP server on loopback that behaves like the simulator's server
 * (`src/simulate/outage.ts`): requests are worked on first in, first
 * out; the oldest finishes once `minDelayMs · factor^((c − limit)/K)` (`c`
 * the requests in flight now, re-evaluated as `c` changes) has passed since it
 * started. A client that gives up does not cancel its work: it stays in
 * flight and slows the others until it is done. While stopped, the work in
 * flight is frozen and new requests wait in a backlog of `backlog` (beyond
 * it, a request is never answered); on resume they all start at once.
 */
export class LatencyServer {
  private readonly http: Server;
  private readonly inFlight: Work[] = [];
  private head = 0;
  private readonly backlog: ServerResponse[] = [];
  private running = true;
  private stoppedAt = 0;
  private pausedMs = 0;
  private timer: NodeJS.Timeout | undefined;
  private checkAt = Infinity;
  private t0 = performance.now();
  private readonly loop = monitorEventLoopDelay({ resolution: 10 });
  readonly stats: ServerSeconds;

  constructor(
    private readonly model: ServerModel,
    seconds: number,
    trace = false,
  ) {
    this.stats = {
      concurrency: new Int32Array(seconds),
      abandoned: 0,
      calls: 0,
      refused: 0,
      peak: 0,
      loopDelayMs: { p99: 0, max: 0 },
      ...(trace ? { trace: [], timerLate: [] } : {}),
    };
    this.http = createServer({ keepAlive: true }, (req, res) => this.onRequest(req, res));
    this.http.keepAliveTimeout = 60_000;
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.http.listen(0, '127.0.0.1', 511, resolve));
    const { port } = this.http.address() as AddressInfo;
    return `http://127.0.0.1:${port}/`;
  }

  /** Second 0 of the per-second figures starts now. */
  startClock(t0: number): void {
    this.t0 = t0;
    this.loop.enable();
  }

  stop(): void {
    if (!this.running) return;
    this.running = false;
    this.stoppedAt = performance.now();
    this.clearTimer();
  }

  resume(): void {
    if (this.running) return;
    const now = performance.now();
    this.pausedMs += now - this.stoppedAt;
    this.running = true;
    const start = this.serverNow(now);
    for (const res of this.backlog) {
      this.inFlight.push({ res, start });
      this.stats.trace?.push(now - this.t0);
    }
    this.backlog.length = 0;
    this.note(now);
    this.schedule(now);
  }

  /** Records the concurrency at a second's start, as the simulator's tick does. */
  tick(second: number): void {
    const c = this.length();
    if (second < this.stats.concurrency.length && c > this.stats.concurrency[second]!) {
      this.stats.concurrency[second] = c;
    }
  }

  async close(): Promise<void> {
    this.loop.disable();
    this.stats.loopDelayMs = { p99: this.loop.percentile(99) / 1e6, max: this.loop.max / 1e6 };
    this.clearTimer();
    for (let i = this.head; i < this.inFlight.length; i++) this.inFlight[i]!.res.destroy();
    for (const res of this.backlog) res.destroy();
    this.http.closeAllConnections();
    await new Promise<void>((resolve) => this.http.close(() => resolve()));
  }

  private onRequest(req: IncomingMessage, res: ServerResponse): void {
    req.resume();
    const now = performance.now();
    if (this.running) {
      this.stats.calls++;
      this.inFlight.push({ res, start: this.serverNow(now) });
      this.stats.trace?.push(now - this.t0);
      this.note(now);
      this.schedule(now);
    } else if (this.backlog.length < this.model.backlog) {
      this.stats.calls++;
      this.backlog.push(res);
    } else {
      // Not accepted: the client hears nothing and times out.
      this.stats.refused++;
    }
  }

  private length(): number {
    return this.inFlight.length - this.head;
  }

  private serverNow(now: number): number {
    return now - this.pausedMs;
  }

  private latency(concurrency: number): number {
    const m = this.model;
    if (concurrency <= m.concurrencyLimit) return m.minDelayMs;
    return m.minDelayMs * m.latencyFactor ** ((concurrency - m.concurrencyLimit) / m.latencyK);
  }

  /** Answers every request whose time has come, oldest first, as the concurrency falls. */
  private complete(): void {
    const dueAt = this.checkAt;
    this.timer = undefined;
    this.checkAt = Infinity;
    if (!this.running) return;
    const now = performance.now();
    this.stats.timerLate?.push([now - this.t0, now - dueAt]);
    const serverNow = this.serverNow(now);
    while (this.length() > 0) {
      const work = this.inFlight[this.head]!;
      if (serverNow < work.start + this.latency(this.length()) - 1e-6) break;
      this.inFlight[this.head] = undefined as never;
      this.head++;
      this.stats.trace?.push(-(now - this.t0) - 1e-3);
      if (work.res.destroyed || work.res.socket === null || work.res.socket.destroyed) {
        this.stats.abandoned++;
      } else {
        work.res.writeHead(200, { 'content-length': '2' }).end('ok');
      }
    }
    if (this.head > 4096 && this.head * 2 > this.inFlight.length) {
      this.inFlight.splice(0, this.head);
      this.head = 0;
    }
    this.schedule(now);
  }

  /** Makes sure a check is due no later than the oldest request's answer. */
  private schedule(now: number): void {
    if (!this.running || this.length() === 0) return;
    const due = this.inFlight[this.head]!.start + this.latency(this.length());
    const at = now + Math.max(0, due - this.serverNow(now));
    // A check already due earlier looks again then; one due later is replaced.
    if (at >= this.checkAt) return;
    this.clearTimer();
    this.checkAt = at;
    // Past setTimeout's range (an astronomically slow answer under overload), look again then.
    this.timer = setTimeout(() => this.complete(), Math.min(maxTimerMs, Math.max(0, at - now)));
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.checkAt = Infinity;
  }

  private note(now: number): void {
    const c = this.length();
    if (c > this.stats.peak) this.stats.peak = c;
    const s = Math.floor((now - this.t0) / 1000);
    if (s >= 0 && s < this.stats.concurrency.length && c > this.stats.concurrency[s]!) {
      this.stats.concurrency[s] = c;
    }
  }
}
