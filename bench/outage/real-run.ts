import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
// The built package, as users run it (`npm run build` first; the bench script does).
import {
  createLogger,
  createQueue,
  createWorker,
  RetryableError,
  type RequeueJob,
  type WorkerOptions,
} from 'requeue';
import type { OutageParams, SecondStats } from '../../src/simulate/outage.js';
import type { SimStrategy } from '../../src/simulate/sim-strategy.js';
import { startServer } from './server-handle.js';

/** One strategy's run against the real system. */
export interface RealRun {
  perSecond: SecondStats[];
  peakConcurrency: number;
  /** Requests that reached the server (backlogged ones included). */
  calls: number;
  /** Jobs (client requests) added, and attempts started. */
  jobs: number;
  attempts: number;
  /** Work the server finished after its client had gone. */
  abandoned: number;
  /** Requests a stopped server with a full backlog left unanswered. */
  refused: number;
  /** The server's own event loop (its thread's): delay p99 and max, ms. */
  serverLoopDelayMs: { p99: number; max: number };
  /** Jobs that died (maxAttempts 1000: none expected). */
  dead: number;
  /** When each retry started minus when requeue scheduled it, ms: median, p95, max. */
  retryLateMs: { p50: number; p95: number; max: number; n: number };
  /** The event loop's delay over the run, ms: p99 and max. */
  loopDelayMs: { p99: number; max: number };
  /** The client timers' mean gap, as drawn, ms (the simulator's is `meanGapMs`). */
  meanGapDrawnMs: number;
  /** What the protections did: jobs turned away (deferred), breaker openings, budget exhaustions. */
  protection: { deferred: number; opened: number; budgetExhausted: number };
  /** With `trace`: what happened when, for finding where time goes (ms since second 0). */
  trace?: RunTrace;
}

/** A traced run's timelines, ms since second 0. */
export interface RunTrace {
  /**
   * Per attempt: [handler start, handler end, the worker's limit as it ends, outcome 1 ok / 0
   * not, when the client's timer was due and when it fired and added the job (a first
   * attempt; −1 otherwise)].
   */
  attempts: number[][];
  /** The workers' thread: [when, how late] for every 10 ms timer that fired ≥ 20 ms late. */
  stalls: number[][];
  /** The server's arrivals (+ms) and answers (−ms), in order. */
  server: number[];
  /** The server thread's answering timers: [when, how late it fired] (ms). */
  serverTimerLate: number[][];
  /** The process's CPU time (both threads, user + system), sampled every second: [when, ms]. */
  cpu: number[][];
}

/** The worker options a protected run adds (see {@link defaultProtections}). */
export type Protections = Pick<
  WorkerOptions<{ client: number }>,
  'breaker' | 'budget' | 'breakerKey' | 'keyConcurrency' | 'concurrency' | 'concurrencyLimit'
> & {
  /** Over the scenario's backoff (e.g. `capMs`, where an empty budget parks a retry); exploration only. */
  policy?: { capMs?: number };
};

/**
 * requeue's protections as a `createWorker` user turns them on, each at its
 * defaults: the queue's circuit breaker (`breaker: {}`: 50 % failures over
 * 10 s with ≥ 10 outcomes opens it for 5 s, doubling on each failed probe up
 * to 30 s) and the retry budget (`budget: {}`: a token bucket of 500, a
 * timeout-caused retry costs 10, a first-attempt success refunds 1; an empty
 * bucket delays the retry ½–1 × 10 s). The worker's concurrency limit learned
 * from latency (`concurrencyLimit`) and due retries first (`retryOrder`) are
 * on without being asked, so they are not named here: a bare run turns the
 * limit off ({@link bareOptions}). Nothing tuned to this bench.
 */
export function defaultProtections(): Protections {
  return { breaker: {}, budget: {} };
}

/** What a bare run gives the worker: every protection off (the limit is on by default). */
export function bareOptions(): Protections {
  return { concurrencyLimit: false };
}

/** A run's switches: `protect` adds {@link defaultProtections}, `overrides` over them. */
export interface RealRunOptions {
  protect?: boolean;
  /** Worker options over the defaults (to find which protection would do); only with `protect`. */
  overrides?: Protections;
  /** Keep timelines ({@link RunTrace}); costs memory, not time. */
  trace?: boolean;
}

const logger = createLogger({ level: 'silent' });

/**
 * Runs the outage for real: `params.clients` clients, each a chain of requeue
 * jobs (one at a time; the next is added an exponentially distributed gap
 * after the previous one completed, as the simulator's client sends its next
 * request), processed by a requeue worker whose handler calls a
 * {@link LatencyServer} on loopback with a client timeout. A timeout is a
 * {@link RetryableError}: requeue's policy schedules the retry. The server
 * is stopped and resumed at the simulator's times.
 */
export async function runReal(
  strategy: SimStrategy,
  params: OutageParams,
  connection: Redis,
  queueName: string,
  random: () => number,
  { protect = false, overrides = {}, trace = false }: RealRunOptions = {},
): Promise<RealRun> {
  const protections: Protections = protect
    ? { ...defaultProtections(), ...overrides }
    : bareOptions();
  const { policy: _policy, ...workerProtections } = protections;
  const seconds = Math.ceil(params.durationMs / 1000);
  const ok = new Int32Array(seconds);
  const errors = new Int32Array(seconds);
  const timeouts = new Int32Array(seconds);
  const server = await startServer({
    model: params.server,
    seconds,
    stopAtMs: params.stopAtMs,
    stopForMs: params.stopForMs,
    trace,
  });
  const policy = {
    strategy: strategy === 'none' ? params.policy.strategy : strategy,
    baseMs: strategy === 'none' ? 0 : params.policy.baseMs,
    capMs: params.policy.capMs,
    factor: params.policy.factor,
    jitter: params.policy.jitter,
    randomMs: params.policy.randomMs,
    // The simulator's clients retry until they succeed.
    maxAttempts: 1000,
    ...protections.policy,
  };
  const queue = createQueue<{ client: number }>(queueName, { connection, policy });
  let t0 = performance.now();
  const secondOf = (now: number): number => Math.floor((now - t0) / 1000);
  const retryAt = new Map<string, number>();
  const late: number[] = [];
  let attempts = 0;

  const attemptTrace: number[][] = [];
  const stalls: number[][] = [];
  const cpu: number[][] = [];
  let limitOf = (): number => 0;
  const addedAtOf = new Map<string, [number, number]>();
  const handler = async (job: RequeueJob<{ client: number }>): Promise<number> => {
    attempts++;
    const startedAt = performance.now() - t0;
    const due = retryAt.get(job.id);
    if (due !== undefined) {
      retryAt.delete(job.id);
      late.push(Math.round(Date.now() - due));
    }
    const outcome = await server.call(params.timeoutMs);
    const endedAt = performance.now();
    // The limit as it stands when this attempt ends (it learns from it just after).
    if (trace) {
      const [dueAt, addedAt] = addedAtOf.get(job.id) ?? [-1, -1];
      addedAtOf.delete(job.id);
      attemptTrace.push([
        startedAt,
        endedAt - t0,
        limitOf(),
        outcome === 'ok' ? 1 : 0,
        dueAt,
        addedAt,
      ]);
    }
    const s = secondOf(endedAt);
    if (outcome === 'ok') {
      if (s < seconds) ok[s]!++;
      return job.data.client;
    }
    if (outcome === 'timeout') {
      if (s < seconds) timeouts[s]!++;
      throw new RetryableError(`client timeout after ${params.timeoutMs} ms`);
    }
    if (s < seconds) errors[s]!++;
    throw new RetryableError(outcome.message, { cause: outcome });
  };

  const worker = createWorker(queueName, handler, {
    connection,
    // Every client can be waiting on the server at once.
    concurrency: Math.min(1000, params.clients),
    policy,
    logger,
    autorun: false,
    ...workerProtections,
  });
  limitOf = () => worker.workerLimit?.limit ?? 0;
  worker.on('error', (err) => console.error(`requeue worker error: ${err.message}`));
  worker.on('retry:scheduled', (e) => retryAt.set(e.jobId, e.retryAt));
  const protection = { deferred: 0, opened: 0, budgetExhausted: 0 };
  worker.on('job:deferred', () => protection.deferred++);
  worker.on('breaker:opened', () => protection.opened++);
  worker.on('budget:exhausted', () => protection.budgetExhausted++);

  // The clients: one job at a time each, the next one a random gap after the last completed.
  let running = true;
  let jobs = 0;
  let dead = 0;
  let gapSum = 0;
  let gaps = 0;
  const clientOf = new Map<string, number>();
  const timers = new Set<NodeJS.Timeout>();
  const next = (client: number): void => {
    const gap = -params.meanGapMs * Math.log(1 - random());
    gapSum += gap;
    gaps++;
    const dueAt = performance.now() - t0 + gap;
    const timer = setTimeout(() => {
      timers.delete(timer);
      if (!running) return;
      jobs++;
      const addedAt = performance.now() - t0;
      queue.add('request', { client }).then(
        (added) => {
          clientOf.set(added.id, client);
          if (trace) addedAtOf.set(added.id, [dueAt, addedAt]);
        },
        (err: Error) => {
          console.error(`add failed: ${err.message}`);
        },
      );
    }, gap);
    timers.add(timer);
  };
  worker.on('job:completed', (e) => {
    clientOf.delete(e.jobId);
    if (running) next(e.result as number);
  });
  worker.on('job:dead-lettered', (e) => {
    dead++;
    const client = clientOf.get(e.jobId);
    if (running && client !== undefined) next(client);
  });

  await worker.waitUntilReady();
  const workerRun = worker.run();
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  t0 = performance.now();
  let tick = t0;
  const ticker = trace
    ? setInterval(() => {
        const now = performance.now();
        if (now - tick >= 30) stalls.push([tick - t0, now - tick - 10]);
        if (Math.floor((now - t0) / 1000) > Math.floor((tick - t0) / 1000)) {
          const used = process.cpuUsage();
          cpu.push([now - t0, (used.user + used.system) / 1000]);
        }
        tick = now;
      }, 10)
    : undefined;
  server.start(t0);
  for (let client = 0; client < params.clients; client++) next(client);
  await new Promise((resolve) => setTimeout(resolve, params.durationMs));
  running = false;
  clearInterval(ticker);
  loop.disable();
  for (const timer of timers) clearTimeout(timer);

  // Unblocks the handlers waiting on a stopped server, then stops the worker.
  const seen = await server.close();
  await worker.close({ timeoutMs: 2_000 });
  await workerRun.catch(() => undefined);
  await queue.close();

  const perSecond: SecondStats[] = [];
  for (let t = 0; t < seconds; t++) {
    perSecond.push({
      t,
      ok: ok[t]!,
      errors: errors[t]!,
      timeouts: timeouts[t]!,
      concurrency: seen.concurrency[t]!,
    });
  }
  late.sort((a, b) => a - b);
  const q = (p: number): number =>
    late[Math.min(late.length - 1, Math.floor(p * late.length))] ?? 0;
  return {
    perSecond,
    peakConcurrency: seen.peak,
    calls: seen.calls,
    jobs,
    attempts,
    abandoned: seen.abandoned,
    refused: seen.refused,
    dead,
    retryLateMs: { p50: q(0.5), p95: q(0.95), max: late.at(-1) ?? 0, n: late.length },
    loopDelayMs: { p99: loop.percentile(99) / 1e6, max: loop.max / 1e6 },
    serverLoopDelayMs: seen.loopDelayMs,
    meanGapDrawnMs: gaps > 0 ? gapSum / gaps : 0,
    protection,
    ...(trace
      ? {
          trace: {
            attempts: attemptTrace,
            stalls,
            server: seen.trace ?? [],
            serverTimerLate: seen.timerLate ?? [],
            cpu,
          },
        }
      : {}),
  };
}
