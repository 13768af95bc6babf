/**
 * The outage's HTTP server in a thread of its own: the latency law's timers
 * keep time even when the workers' event loop is busy. Started by
 * `real-run.ts`; stops and resumes itself at the run's times.
 */
import { performance } from 'node:perf_hooks';
import { parentPort, workerData } from 'node:worker_threads';
import type { ServerModel } from '../../src/simulate/outage.js';
import { LatencyServer } from './latency-server.js';

export interface ServerThreadData {
  model: ServerModel;
  seconds: number;
  stopAtMs: number;
  stopForMs: number;
  /** Keep every arrival and answer time (`ServerSeconds.trace`). */
  trace?: boolean;
}

/** Main → thread: start the clock (an absolute time, ms since the epoch), or close. */
export type ToThread = { kind: 'start'; t0Epoch: number } | { kind: 'close' };

const data = workerData as ServerThreadData;
const port = parentPort!;
const server = new LatencyServer(data.model, data.seconds, data.trace);
const timers: NodeJS.Timeout[] = [];
port.on('message', (message: ToThread) => {
  if (message.kind === 'start') {
    const t0 = message.t0Epoch - performance.timeOrigin;
    server.startClock(t0);
    const at = (ms: number, fn: () => void): void => {
      timers.push(setTimeout(fn, Math.max(0, t0 + ms - performance.now())));
    };
    // A run without an outage (the overload scenario) has stopForMs 0.
    if (data.stopForMs > 0) {
      at(data.stopAtMs, () => server.stop());
      at(data.stopAtMs + data.stopForMs, () => server.resume());
    }
    for (let s = 0; s < data.seconds; s++) at(s * 1000, () => server.tick(s));
  } else {
    for (const timer of timers) clearTimeout(timer);
    void server.close().then(() => {
      port.postMessage({ kind: 'stats', stats: server.stats });
      port.close();
    });
  }
});
port.postMessage({ kind: 'url', url: await server.listen() });
