/**
 * The outage of `requeue simulate --scenario outage`, run for real and beside
 * the simulator: requeue workers on a private redis-server call an
 * in-process HTTP server on loopback that follows the simulator's latency law
 * (bench/outage/latency-server.ts), stopped and resumed at the simulator's
 * times; each client is a chain of jobs whose handler makes the request with
 * a client timeout, a timeout being a retryable failure that requeue's policy
 * schedules (bench/outage/real-run.ts). Scaled to a 2-core machine by
 * `--scale` (clients, server limit, K and backlog × scale; every duration ×
 * scale, so the request rate stays ~100/s); the simulator runs with the very
 * same parameters. Prints the per-second figures of both sides and each
 * side's recovered / not-recovered verdict, per strategy; writes its section of
 * bench/RESULTS.md. `npm run bench:outage` (builds first), or
 * `node --import tsx bench/outage.bench.ts [--scale 0.5] [--strategies fixed,exponential]
 * [--duration-ms 60000] [--no-write]`.
 */
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import type * as Outage from '../src/simulate/outage.js';
import type { OutageParams, OutageResult, SecondStats } from '../src/simulate/outage.js';
import type * as Policy from '../src/policy/retry-policy.js';
import type * as Random from '../src/util/random.js';
import type * as Connection from '../src/redis/connection.js';
import type * as RedisServer from '../src/redis/redis-server.js';
import type { SimStrategy } from '../src/simulate/sim-strategy.js';
import { runReal, type RealRun } from './outage/real-run.js';
import { describeMachine } from './support/machine.js';
import { writeResultsSection } from './support/results-file.js';
import { describeRevision } from './support/revision.js';

const { values } = parseArgs({
  options: {
    scale: { type: 'string', default: '0.5' },
    strategies: { type: 'string', default: 'fixed,exponential' },
    'duration-ms': { type: 'string', default: '60000' },
    seed: { type: 'string', default: '7' },
    'no-write': { type: 'boolean', default: false },
  },
});
const scale = Number(values.scale);
const strategies = values.strategies.split(',') as SimStrategy[];
const durationMs = Number(values['duration-ms']);
const seed = Number(values.seed);
const write = !values['no-write'];
if (!(scale > 0 && scale <= 1)) throw new Error(`--scale must be in (0, 1], got ${values.scale}`);

// The measured code is the build, like the other benches (the script builds first).
const dist = (path: string): Promise<unknown> => import(`../dist/src/${path}` as string);
const { simulateOutage, baselineOkPerSecond, recoverySecond, recoveryWindowS } = (await dist(
  'simulate/outage.js',
)) as typeof Outage;
const { retryPolicySchema } = (await dist('policy/retry-policy.js')) as typeof Policy;
const { seededRandom } = (await dist('util/random.js')) as typeof Random;
const { createRedis } = (await dist('redis/connection.js')) as typeof Connection;
const { startRedisServer } = (await dist('redis/redis-server.js')) as typeof RedisServer;

/**
 * Seed 004's outage, as `requeue simulate --scenario outage` runs it, with the
 * backlog of the README's example (512: with 1024 no policy recovers).
 */
const full = {
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

/** The outage × `s`: counts and durations alike, so every ratio between them holds. */
function scaled(s: number, runMs: number): OutageParams {
  return {
    clients: Math.round(full.clients * s),
    seed,
    meanGapMs: full.meanGapMs * s,
    timeoutMs: full.timeoutMs * s,
    stopAtMs: full.stopAtMs * s,
    stopForMs: full.stopForMs * s,
    durationMs: runMs,
    server: {
      minDelayMs: full.minDelayMs * s,
      concurrencyLimit: full.concurrencyLimit * s,
      latencyFactor: full.latencyFactor,
      latencyK: full.latencyK * s,
      backlog: Math.round(full.backlog * s),
    },
    policy: retryPolicySchema.parse({
      baseMs: full.baseMs * s,
      capMs: full.capMs * s,
      factor: 2.718,
      jitter: 0.1,
    }),
  };
}

const params = scaled(scale, durationMs);
const reference = scaled(1, full.durationMs);

interface Side {
  perSecond: SecondStats[];
  recovered: boolean;
  recoveryMs: number | null;
  baseline: number;
  peak: number;
}

function verdict(perSecond: SecondStats[], p: OutageParams, peak: number): Side {
  const baseline = baselineOkPerSecond(perSecond, p);
  const at = recoverySecond(perSecond, p, baseline);
  const resume = p.stopAtMs + p.stopForMs;
  return {
    perSecond,
    recovered: at !== undefined,
    recoveryMs: at === undefined ? null : Math.max(0, at * 1000 - resume),
    baseline,
    peak,
  };
}

const describe = (p: OutageParams): string =>
  `${p.clients} clients, a request every ${p.meanGapMs / 1000} s on average each ` +
  `(~${Math.round((p.clients * 1000) / p.meanGapMs)} req/s), client timeout ${p.timeoutMs} ms; ` +
  `server ${p.server.minDelayMs} ms up to ${p.server.concurrencyLimit} in flight, ` +
  `×${p.server.latencyFactor} per ${p.server.latencyK} more, backlog ${p.server.backlog}; ` +
  `stopped at ${p.stopAtMs / 1000} s for ${p.stopForMs / 1000} s; run ${p.durationMs / 1000} s; ` +
  `backoff baseMs ${p.policy.baseMs}, capMs ${p.policy.capMs}, factor ${p.policy.factor}, ` +
  `jitter ${p.policy.jitter}; seed ${p.seed}`;

const fmtVerdict = (s: Side): string =>
  s.recovered
    ? `**recovered**, ${((s.recoveryMs ?? 0) / 1000).toFixed(1)} s after the resume`
    : '**not recovered**';

process.stderr.write(`outage bench: ${describe(params)}\n`);
const startedAt = new Date();
const wallStart = performance.now();
const loadStart = loadavg()[0] ?? 0;

const simScaled = simulateOutage(strategies, params);
const simFull = simulateOutage(strategies, reference);

const redis = await startRedisServer({ appendonly: false });
const connection = createRedis(redis.url);
const machine = await describeMachine(connection);
const real = new Map<SimStrategy, RealRun>();
try {
  for (const [i, strategy] of strategies.entries()) {
    await connection.flushall();
    const t = performance.now();
    process.stderr.write(`real run: ${strategy} (${durationMs / 1000} s) … `);
    const run = await runReal(
      strategy,
      params,
      connection,
      `outage-${strategy}`,
      seededRandom((seed * 7919 + i) >>> 0),
    );
    real.set(strategy, run);
    process.stderr.write(`${((performance.now() - t) / 1000).toFixed(0)} s\n`);
  }
} finally {
  connection.disconnect();
  await redis.stop();
}
const loadEnd = loadavg()[0] ?? 0;
const wallS = (performance.now() - wallStart) / 1000;

const sections: string[] = [];
const summary: string[] = [
  '| strategy | side | verdict | ok/s before | ok/s, last 10 s | peak concurrency | timeouts | requests the server got |',
  '| --- | --- | --- | --- | --- | --- | --- | --- |',
];
const lastTen = (ps: SecondStats[]): number =>
  ps.slice(-10).reduce((n, s) => n + s.ok, 0) / Math.min(10, ps.length);
const sum = (ps: SecondStats[], k: 'timeouts' | 'errors'): number =>
  ps.reduce((n, s) => n + s[k], 0);
const headline: string[] = [];
for (const [i, strategy] of strategies.entries()) {
  const simRun = simScaled[i]! satisfies OutageResult;
  const realRun = real.get(strategy)!;
  const sim = verdict(simRun.perSecond, params, simRun.peakConcurrency);
  const mine = verdict(realRun.perSecond, params, realRun.peakConcurrency);
  const ref = simFull[i]!;
  summary.push(
    `| ${strategy} | simulator | ${fmtVerdict(sim)} | ${sim.baseline.toFixed(1)} | ${lastTen(sim.perSecond).toFixed(1)} | ${sim.peak.toLocaleString('en-US')} | ${sum(sim.perSecond, 'timeouts').toLocaleString('en-US')} | ${simRun.calls.toLocaleString('en-US')} |`,
    `| ${strategy} | real (requeue + Redis + HTTP) | ${fmtVerdict(mine)} | ${mine.baseline.toFixed(1)} | ${lastTen(mine.perSecond).toFixed(1)} | ${mine.peak.toLocaleString('en-US')} | ${sum(mine.perSecond, 'timeouts').toLocaleString('en-US')} | ${realRun.calls.toLocaleString('en-US')} |`,
    `| ${strategy} | simulator, unscaled (×1, 180 s) | ${fmtVerdict(verdict(ref.perSecond, reference, ref.peakConcurrency))} | ${ref.baselineOkPerSecond.toFixed(1)} | ${lastTen(ref.perSecond).toFixed(1)} | ${ref.peakConcurrency.toLocaleString('en-US')} | ${sum(ref.perSecond, 'timeouts').toLocaleString('en-US')} | ${ref.calls.toLocaleString('en-US')} |`,
  );
  headline.push(
    `${strategy}: simulator ${sim.recovered ? 'recovered' : 'not recovered'}, real ${mine.recovered ? 'recovered' : 'not recovered'}`,
  );
  const rows = sim.perSecond.map((s, t) => {
    const r = mine.perSecond[t]!;
    const down = t * 1000 >= params.stopAtMs - 999 && t * 1000 < params.stopAtMs + params.stopForMs;
    return `| ${t}${down ? ' ⏸' : ''} | ${s.ok} | ${r.ok} | ${s.errors} | ${r.errors} | ${s.timeouts} | ${r.timeouts} | ${s.concurrency} | ${r.concurrency} |`;
  });
  sections.push(
    `### ${strategy}: per second, simulator (sim) and real\n\n` +
      `Real side: ${realRun.jobs.toLocaleString('en-US')} jobs, ${realRun.attempts.toLocaleString('en-US')} attempts, ` +
      `${realRun.abandoned.toLocaleString('en-US')} answers to clients that had gone, ${realRun.refused} requests refused by the full backlog, ${realRun.dead} dead; ` +
      `retries started ${realRun.retryLateMs.p50} ms (median), ${realRun.retryLateMs.p95} ms (p95), ${realRun.retryLateMs.max} ms (max) after their scheduled time (${realRun.retryLateMs.n.toLocaleString('en-US')} retries); ` +
      `event-loop delay of the workers' thread p99 ${realRun.loopDelayMs.p99.toFixed(0)} ms, max ${realRun.loopDelayMs.max.toFixed(0)} ms; ` +
      `of the server's thread p99 ${realRun.serverLoopDelayMs.p99.toFixed(0)} ms, max ${realRun.serverLoopDelayMs.max.toFixed(0)} ms.\n\n` +
      `| t (s) | ok sim | ok real | errors sim | errors real | timeouts sim | timeouts real | concurrency sim | concurrency real |\n` +
      `| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n` +
      rows.join('\n'),
  );
}

const command = `npm run bench:outage → node --import tsx bench/outage.bench.ts --scale ${scale} --strategies ${strategies.join(',')} --duration-ms ${durationMs} --seed ${seed}`;
const body = `## Outage: the simulator against the real system

Written by \`bench/outage.bench.ts\` on ${startedAt.toISOString()} (the run took ${wallS.toFixed(0)} s).

- Command: \`${command}\`; requeue at ${describeRevision(['src', 'workers'])}
- Machine: \`${machine.uname}\`; CPU: ${machine.cpuModel}, ${machine.cores} cores; 1-minute load average ${loadStart.toFixed(2)} at the start, ${loadEnd.toFixed(2)} at the end (other sessions' work shared the box)
- Node ${machine.node}; redis-server ${machine.redis} (a private redis-server started for the run, appendonly no, hz 100)
- Parameters (both sides): ${describe(params)}. This is seed 004's outage (the README's, with backlog 512) × ${scale}: clients, the server's limit, K and backlog × ${scale}, every duration (gap, timeout, latency, outage, backoff base and cap) × ${scale}, so the request rate stays ~100/s, the latency law's exponent is the same function of the fraction of clients in flight, and a run fits in ${durationMs / 1000} s. The run is shorter than ${scale} × 180 s; the recovery rule (≥ 90 % of the ok/s before the stop, concurrency ≤ the limit, ${recoveryWindowS} s in a row) is the simulator's, applied to both sides' per-second figures by the same function.
- Real side: one requeue worker (the built package, concurrency ${Math.min(1000, params.clients)}: every client can wait on the server at once) on the private redis-server. Each of the ${params.clients} clients is a chain of jobs, one at a time: its next job is added an exponential gap (mean ${params.meanGapMs} ms) after the previous one completed, as the simulator's client sends its next request. The handler makes a GET to an in-process HTTP server on 127.0.0.1 (keep-alive agent) and gives up after ${params.timeoutMs} ms (\`RetryableError\`), so requeue's policy schedules the retry (maxAttempts 1000; the simulator's clients never give up). The server (\`bench/outage/latency-server.ts\`, in a worker thread of the same process so that its timers keep time when the workers' event loop is busy) answers first in, first out by the simulator's law, re-evaluated as the concurrency changes, finishes the work of clients that gave up, and is stopped and resumed by its own timers at the simulator's times; requests while stopped wait in its backlog and all start on resume.
- "errors" are failures other than timeouts (the simulator's are breaker refusals; no breaker here, so 0 on both sides unless a connection failed). Concurrency is the highest number of requests in flight in the second (a stopped server's backlog not counted), noted on every arrival and at each second's start, as the simulator does.

| | |
| --- | --- |
${headline.map((h) => `| ${h.split(':')[0]} | ${h.split(': ')[1]} |`).join('\n')}

${summary.join('\n')}

${sections.join('\n\n')}`;

process.stdout.write(`${body}\n`);
if (write) await writeResultsSection('bench/RESULTS.md', 'outage-bench', body);
