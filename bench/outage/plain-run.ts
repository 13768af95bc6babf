/**
 * The steady overload's reference in the same run: no queue, no Redis, just
 * `concurrency` loops each calling the same latency server again the moment
 * its answer arrives, with the same client timeout. Told the server's knee,
 * it is the most any client gets from this server on this machine at this
 * moment: the server's best as computed (`serverBest`) assumes a client
 * that turns an answer into the next request in no time, which a real
 * process on a loaded box does not.
 */
import { performance } from 'node:perf_hooks';
import type { OutageParams } from '../../src/simulate/outage.js';
import { startServer } from './server-handle.js';

export interface PlainRun {
  /** Answers per second, from `fromS` to the end. */
  goodput: number;
  /** Answers per second over the run. */
  ok: number[];
  loopDelayMs: { p99: number; max: number };
}

/** `concurrency` callers for `durationMs`; goodput counted from second `fromS`. */
export async function runPlain(
  params: OutageParams,
  concurrency: number,
  durationMs: number,
  fromS: number,
): Promise<PlainRun> {
  const seconds = Math.ceil(durationMs / 1000);
  const server = await startServer({ model: params.server, seconds, stopAtMs: 0, stopForMs: 0 });
  const ok = new Array<number>(seconds).fill(0);
  const t0 = performance.now();
  const end = t0 + durationMs;
  server.start(t0);
  const caller = async (): Promise<void> => {
    while (performance.now() < end) {
      const outcome = await server.call(params.timeoutMs);
      const s = Math.floor((performance.now() - t0) / 1000);
      if (outcome === 'ok' && s < seconds) ok[s]! += 1;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, caller));
  const seen = await server.close();
  const tail = ok.slice(fromS);
  return {
    goodput: tail.reduce((n, x) => n + x, 0) / Math.max(1, tail.length),
    ok,
    loopDelayMs: seen.loopDelayMs,
  };
}
