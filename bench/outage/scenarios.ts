/**
 * The outage bench's two scenarios, as parameters both sides run: seed 004's
 * outage (`requeue simulate --scenario outage`) and a steady overload (no
 * outage; the clients offer twice what the server can answer at best), each
 * scaled to the 2-core machine by one factor.
 */
import type { OutageParams, ServerModel } from '../../src/simulate/outage.js';
import type { RetryPolicy } from '../../src/policy/retry-policy.js';

export type Scenario = 'outage' | 'overload';

/**
 * Seed 004's outage, as `requeue simulate --scenario outage` runs it, with the
 * backlog of the README's example (512: with 1024 no policy recovers).
 */
export const outageFull = {
  clients: 1000,
  meanGapMs: 10_000,
  timeoutMs: 2000,
  stopAtMs: 15_000,
  stopForMs: 20_000,
  durationMs: 180_000,
  minDelayMs: 100,
  concurrencyLimit: 30,
  latencyFactor: 1.05,
  latencyK: 15,
  backlog: 512,
  baseMs: 100,
  capMs: 300_000,
};

/**
 * The steady overload: the same clients (~100 req/s offered) against a
 * server that answers in 400 ms up to 10 in flight and ×1.05 per 2 more
 * beyond, so its throughput, c / latency(c), peaks at ~48 req/s with ~41 in
 * flight (its knee, {@link serverBest}) and falls past it. No stop.
 */
export const overloadServerFull: ServerModel = {
  minDelayMs: 400,
  concurrencyLimit: 10,
  latencyFactor: 1.05,
  latencyK: 2,
  backlog: 512,
};

/**
 * The scenario × `s`: counts and durations alike (clients, the server's
 * limit, K and backlog; gap, timeout, latency, outage, backoff base and cap),
 * so the request rate stays ~100/s and every ratio between them holds.
 */
export function scenarioParams(
  scenario: Scenario,
  s: number,
  runMs: number,
  seed: number,
  parsePolicy: (input: object) => RetryPolicy,
): OutageParams {
  const f = outageFull;
  const server: ServerModel =
    scenario === 'outage'
      ? {
          minDelayMs: f.minDelayMs,
          concurrencyLimit: f.concurrencyLimit,
          latencyFactor: f.latencyFactor,
          latencyK: f.latencyK,
          backlog: f.backlog,
        }
      : overloadServerFull;
  return {
    clients: Math.round(f.clients * s),
    seed,
    meanGapMs: f.meanGapMs * s,
    timeoutMs: f.timeoutMs * s,
    // The overload has no outage: the stop falls at the run's end, where nothing sees it.
    stopAtMs: scenario === 'outage' ? f.stopAtMs * s : runMs,
    stopForMs: scenario === 'outage' ? f.stopForMs * s : 0,
    durationMs: runMs,
    server: {
      minDelayMs: server.minDelayMs * s,
      concurrencyLimit: server.concurrencyLimit * s,
      latencyFactor: server.latencyFactor,
      latencyK: server.latencyK * s,
      backlog: Math.round(server.backlog * s),
    },
    policy: parsePolicy({
      baseMs: f.baseMs * s,
      capMs: f.capMs * s,
      factor: 2.718,
      jitter: 0.1,
    }),
  };
}

/** The server's best throughput (req/s) and the concurrency it is reached at: its knee. */
export function serverBest(
  model: ServerModel,
  latencyMs: (c: number, m: ServerModel) => number,
): { perSecond: number; concurrency: number } {
  let best = { perSecond: 0, concurrency: 1 };
  for (let c = 1; c <= 100_000; c++) {
    const perSecond = (c * 1000) / latencyMs(c, model);
    if (perSecond > best.perSecond) best = { perSecond, concurrency: c };
    else if (c > model.concurrencyLimit && perSecond < best.perSecond / 2) break;
  }
  return best;
}

export const describeParams = (p: OutageParams): string =>
  `${p.clients} clients, a request every ${p.meanGapMs / 1000} s on average each ` +
  `(~${Math.round((p.clients * 1000) / p.meanGapMs)} req/s), client timeout ${p.timeoutMs} ms; ` +
  `server ${p.server.minDelayMs} ms up to ${p.server.concurrencyLimit} in flight, ` +
  `×${p.server.latencyFactor} per ${p.server.latencyK} more, backlog ${p.server.backlog}; ` +
  (p.stopForMs > 0
    ? `stopped at ${p.stopAtMs / 1000} s for ${p.stopForMs / 1000} s; `
    : 'never stopped; ') +
  `run ${p.durationMs / 1000} s; ` +
  `backoff baseMs ${p.policy.baseMs}, capMs ${p.policy.capMs}, factor ${p.policy.factor}, ` +
  `jitter ${p.policy.jitter}; seed ${p.seed}`;
