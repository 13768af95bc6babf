import { ConfigError } from '../errors/config-error.js';

/** What a contention run's size depends on (its params; no import, so no cycle). */
export interface ContentionSize {
  clients: number;
  trials: number;
}

/** What an outage run's size depends on. */
export interface OutageSize {
  clients: number;
  durationMs: number;
  timeoutMs: number;
  meanGapMs: number;
  server: { minDelayMs: number };
}

/**
 * How much one simulation may do, all strategies together. Each flag has a
 * bound of its own, but their product is what costs: 10,000 clients × 100,000
 * trials, or 200,000 clients sending every millisecond for an hour, would
 * run for hours and (in the outage, where a loaded server keeps the requests
 * its clients gave up on) hold memory in proportion. At either bound a run
 * took 8–14 s of CPU (250 MB at most) on a busy 2-core machine, 2026-11-25.
 */
export const simulationLimits = Object.freeze({
  /** Contention: `clients² × trials × strategies`, the calls if every client collides with every other. */
  contentionCalls: 100_000_000,
  /** Outage: the most requests the clients can send, {@link outageRequests}. */
  outageRequests: 10_000_000,
});

/** Names a field in an error line: the CLI passes its flag names. */
export type FieldName = (field: string) => string;

const plain: FieldName = (field) => field;

/**
 * The calls a contention run makes at most: a client's write can fail once
 * for every other client's success, so each trial is at most about
 * `clients²` calls per strategy.
 */
export function contentionCalls(params: ContentionSize, strategies: number): number {
  return params.clients * params.clients * params.trials * strategies;
}

/**
 * The requests an outage run's clients send, at most and on average: each
 * client is closed-loop, so one request takes at least the shorter of a
 * timeout (a failure, then a backoff ≥ 0) and an answer after the mean gap
 * (a success takes at least `minDelayMs`).
 */
export function outageRequests(params: OutageSize, strategies: number): number {
  const cycleMs = Math.min(params.timeoutMs, params.meanGapMs + params.server.minDelayMs);
  return params.clients * Math.ceil(params.durationMs / cycleMs) * strategies;
}

/** Refuses a contention run larger than {@link simulationLimits}, naming the fields. */
export function checkContentionWork(
  params: ContentionSize,
  strategies: number,
  name: FieldName = plain,
): void {
  const calls = contentionCalls(params, strategies);
  if (calls > simulationLimits.contentionCalls)
    throw new ConfigError(
      `${name('clients')} (${params.clients})² × ${name('trials')} (${params.trials}) × ${name('strategies')} (${strategies}) ` +
        `is up to ${calls.toExponential(1)} simulated calls, more than ${simulationLimits.contentionCalls.toExponential(0)}: ` +
        `lower ${name('clients')}, ${name('trials')} or ${name('strategies')}`,
    );
}

/** Refuses an outage run larger than {@link simulationLimits}, naming the fields. */
export function checkOutageWork(
  params: OutageSize,
  strategies: number,
  name: FieldName = plain,
): void {
  const requests = outageRequests(params, strategies);
  if (requests > simulationLimits.outageRequests)
    throw new ConfigError(
      `${name('clients')} (${params.clients}) × ${name('durationMs')} (${params.durationMs}) ÷ ` +
        `min(${name('timeoutMs')}, ${name('meanGapMs')} + ${name('minDelayMs')}) × ${name('strategies')} (${strategies}) ` +
        `is up to ${requests.toExponential(1)} simulated requests, more than ${simulationLimits.outageRequests.toExponential(0)}: ` +
        `lower ${name('clients')}, ${name('durationMs')} or ${name('strategies')}, or raise ${name('meanGapMs')}`,
    );
}
