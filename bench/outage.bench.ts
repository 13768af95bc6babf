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
 * bench/RESULTS.md.
 *
 * `--protect` runs each strategy twice, bare (every protection off, the
 * default concurrency limit too) and with requeue's default protections
 * (`defaultProtections()` in bench/outage/real-run.ts, plus what is on by
 * default; the simulator gets the same breaker, budget and limit), side by
 * side. `--protect-options '<json>'` puts worker options over them (breaker,
 * budget, concurrency, concurrencyLimit, keyConcurrency; `"breakerKey": "server"` gives every
 * job that key) to find which protection would do; such runs are printed, not
 * written. `--scenario overload` runs the steady overload instead
 * (bench/outage/scenarios.ts: the same clients, ~2× the server's best, no
 * stop) and reports goodput against the server's best, and, before each
 * protected run, against a plain client at the knee in the same run
 * (bench/outage/plain-run.ts: no queue, no Redis), the most this machine
 * gets from the server at that moment.
 *
 * `npm run bench:outage` (builds first), or
 * `node --import tsx bench/outage.bench.ts [--scale 0.5] [--strategies fixed,exponential]
 * [--duration-ms 60000|50000|40000] [--scenario outage|overload] [--protect] [--protect-options '{}'] [--control] [--no-write]`.
 * `--control` runs the outage with a 0-length stop (printed, not written): the
 * recovery rule's control, which a server that was never stopped must pass.
 */
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import type * as Outage from '../src/simulate/outage.js';
import type { OutageParams } from '../src/simulate/outage.js';
import type * as Policy from '../src/policy/retry-policy.js';
import type * as Breaker from '../src/policy/breaker/breaker-options.js';
import type * as Budget from '../src/policy/budget/budget-options.js';
import type * as Limit from '../src/policy/limit/gradient-options.js';
import type * as Dispatch from '../src/simulate/outage/dispatch.js';
import type * as Random from '../src/util/random.js';
import type * as Connection from '../src/redis/connection.js';
import type * as RedisServer from '../src/redis/redis-server.js';
import type { SimStrategy } from '../src/simulate/sim-strategy.js';
import { runPlain, type PlainRun } from './outage/plain-run.js';
import { defaultProtections, runReal, type Protections, type RealRun } from './outage/real-run.js';
import { figures, perSecondTable, summaryTable, type Run } from './outage/report.js';
import {
  describeParams as describe,
  scenarioParams,
  serverBest,
  type Scenario,
} from './outage/scenarios.js';
import { describeMachine } from './support/machine.js';
import { writeResultsSection } from './support/results-file.js';
import { describeRevision } from './support/revision.js';

const { values } = parseArgs({
  options: {
    scale: { type: 'string', default: '0.5' },
    strategies: { type: 'string', default: 'fixed,exponential' },
    // Default: the outage 60 s bare, 50 s with --protect (four runs in ~3.5 min); the overload 40 s.
    'duration-ms': { type: 'string', default: '' },
    seed: { type: 'string', default: '7' },
    scenario: { type: 'string', default: 'outage' },
    protect: { type: 'boolean', default: false },
    'protect-options': { type: 'string', default: '' },
    'no-write': { type: 'boolean', default: false },
    control: { type: 'boolean', default: false },
  },
});
const scale = Number(values.scale);
const strategies = values.strategies.split(',') as SimStrategy[];
const scenario = values.scenario as Scenario;
const durationMs = Number(
  values['duration-ms'] || (scenario === 'overload' ? 40_000 : values.protect ? 50_000 : 60_000),
);
const seed = Number(values.seed);
const protect = values.protect;
const overrideText = values['protect-options'];
const control = values.control;
const write = !values['no-write'] && overrideText === '' && !control;
if (!(scale > 0 && scale <= 1)) throw new Error(`--scale must be in (0, 1], got ${values.scale}`);
if (scenario !== 'outage' && scenario !== 'overload')
  throw new Error(`--scenario must be outage or overload, got ${values.scenario}`);
if (overrideText !== '' && !protect) throw new Error('--protect-options needs --protect');
if (control && scenario !== 'outage') throw new Error('--control is for --scenario outage');

// The measured code is the build, like the other benches (the script builds first).
const dist = (path: string): Promise<unknown> => import(`../dist/src/${path}` as string);
const {
  simulateOutage,
  baselineOkPerSecond,
  offeredOkPerSecond: offeredPerSecond,
  recoverySecond,
  recoveryWindowS,
  serverLatencyMs,
  serverRecoverySecond,
} = (await dist('simulate/outage.js')) as typeof Outage;
const { retryPolicySchema } = (await dist('policy/retry-policy.js')) as typeof Policy;
const { parseBreakerOptions } = (await dist('policy/breaker/breaker-options.js')) as typeof Breaker;
const { parseBudgetOptions } = (await dist('policy/budget/budget-options.js')) as typeof Budget;
const { seededRandom } = (await dist('util/random.js')) as typeof Random;
const { parseConcurrencyLimit } = (await dist('policy/limit/gradient-options.js')) as typeof Limit;
const { defaultOutageProtection } = (await dist('simulate/outage/dispatch.js')) as typeof Dispatch;
const { createRedis } = (await dist('redis/connection.js')) as typeof Connection;
const { startRedisServer } = (await dist('redis/redis-server.js')) as typeof RedisServer;

/** `--protect-options`, with `breakerKey` given as the one key every job gets. */
function overridesOf(text: string): Protections {
  if (text === '') return {};
  const { breakerKey, ...rest } = JSON.parse(text) as Protections & { breakerKey?: string };
  return { ...rest, ...(breakerKey === undefined ? {} : { breakerKey: () => breakerKey }) };
}
const overrides = overridesOf(overrideText);
const protections = { ...defaultProtections(), ...overrides };

const parsePolicy = (input: object): Policy.RetryPolicy => retryPolicySchema.parse(input);
// --control: the same outage with a 0-length stop, the recovery rule's control (a server never stopped must pass).
const controlled = (p: OutageParams): OutageParams => (control ? { ...p, stopForMs: 0 } : p);
const params = controlled(scenarioParams(scenario, scale, durationMs, seed, parsePolicy));
const reference = controlled(scenarioParams(scenario, 1, 180_000, seed, parsePolicy));
// The simulator models the breaker and the budget (one key, deferral) and the worker's
// concurrency limit (on unless `concurrencyLimit: false`), not keyConcurrency.
const limitOption = protections.concurrencyLimit;
const protectedParams = (p: OutageParams): OutageParams => {
  const defaults = defaultOutageProtection(p.clients);
  return {
    ...p,
    policy: { ...p.policy, ...protections.policy },
    breaker: protections.breaker ? parseBreakerOptions(protections.breaker) : undefined,
    budget: protections.budget ? parseBudgetOptions(protections.budget) : undefined,
    protect:
      limitOption === false
        ? undefined
        : {
            ...defaults,
            limit: parseConcurrencyLimit(limitOption ?? {}),
            concurrency: protections.concurrency ?? defaults.concurrency,
          },
  };
};
const best = serverBest(params.server, serverLatencyMs);
const rule = { baselineOkPerSecond, recoverySecond, serverRecoverySecond };

process.stderr.write(`${scenario} bench: ${describe(params)}\n`);
if (protect) process.stderr.write(`protections: ${JSON.stringify(protections)}\n`);
const startedAt = new Date();
const wallStart = performance.now();
const loadStart = loadavg()[0] ?? 0;

const simScaled = simulateOutage(strategies, params);
const simFull = simulateOutage(strategies, reference);
const simProtected = protect ? simulateOutage(strategies, protectedParams(params)) : [];

const redis = await startRedisServer({ appendonly: false });
const connection = createRedis(redis.url);
const machine = await describeMachine(connection);
const real = new Map<string, RealRun>();
const plain = new Map<string, PlainRun>();
// The overload's same-run reference, just before each protected run: a plain client at the knee.
const plainMs = 20_000;
const plainFromS = 5;
try {
  for (const [i, strategy] of strategies.entries()) {
    for (const on of protect ? [false, true] : [false]) {
      if (scenario === 'overload' && on) {
        process.stderr.write(`plain client at the knee (${plainMs / 1000} s) … `);
        const t = performance.now();
        plain.set(strategy, await runPlain(params, best.concurrency, plainMs, plainFromS));
        process.stderr.write(`${((performance.now() - t) / 1000).toFixed(0)} s\n`);
      }
      await connection.flushall();
      // A connection per run: a worker's forced close (its 2 s ran out) can close the one it was given.
      const runConnection = createRedis(redis.url);
      const t = performance.now();
      process.stderr.write(
        `real run: ${strategy}${on ? ', protected' : ''} (${durationMs / 1000} s) … `,
      );
      const run = await runReal(
        strategy,
        params,
        runConnection,
        `${scenario}-${strategy}${on ? '-protected' : ''}`,
        seededRandom((seed * 7919 + i) >>> 0),
        { protect: on, overrides },
      );
      runConnection.disconnect();
      real.set(`${strategy}:${on}`, run);
      process.stderr.write(`${((performance.now() - t) / 1000).toFixed(0)} s\n`);
    }
  }
} finally {
  connection.disconnect();
  await redis.stop();
}
const loadEnd = loadavg()[0] ?? 0;
const wallS = (performance.now() - wallStart) / 1000;

const fromReal = (r: RealRun, on: boolean): Run => ({
  side: on ? 'real, protected' : 'real (requeue + Redis + HTTP)',
  protect: on,
  perSecond: r.perSecond,
  peak: r.peakConcurrency,
  calls: r.calls,
  protection: r.protection,
});
const fromSim = (r: Outage.OutageResult, side: string, on: boolean): Run => ({
  side,
  protect: on,
  perSecond: r.perSecond,
  peak: r.peakConcurrency,
  calls: r.calls,
});

const rows: { strategy: string; run: Run; f: ReturnType<typeof figures> }[] = [];
const sections: string[] = [];
const headline: string[] = [];
const verdictWord = (f: ReturnType<typeof figures>): string =>
  scenario === 'overload'
    ? `${((100 * f.goodput) / best.perSecond).toFixed(0)} % of the best`
    : f.recovered
      ? `recovered (${((f.recoveryMs ?? 0) / 1000).toFixed(1)} s)`
      : 'not recovered';
for (const [i, strategy] of strategies.entries()) {
  const bare = real.get(`${strategy}:false`)!;
  const runs: Run[] = [fromSim(simScaled[i]!, 'simulator', false), fromReal(bare, false)];
  if (protect) {
    runs.push(fromSim(simProtected[i]!, 'simulator, protected', true));
    runs.push(fromReal(real.get(`${strategy}:true`)!, true));
  }
  const unscaled = fromSim(simFull[i]!, 'simulator, unscaled (×1, 180 s)', false);
  for (const run of [...runs, unscaled]) {
    const p = run === unscaled ? reference : run.protect ? protectedParams(params) : params;
    rows.push({ strategy, run, f: figures(scenario, run, p, rule) });
  }
  const mine = rows.filter((r) => r.strategy === strategy);
  const plainRef = plain.get(strategy);
  const protectedRow = mine.find((r) => r.run.side === 'real, protected');
  const ofPlain =
    plainRef && protectedRow
      ? `; real, protected, against the plain client at the knee just before it: ${((100 * protectedRow.f.goodput) / plainRef.goodput).toFixed(0)} %`
      : '';
  headline.push(
    `| ${strategy} | ${mine.map((r) => `${r.run.side}: ${verdictWord(r.f)}`).join('; ')}${ofPlain} |`,
  );
  const realRuns = protect ? [bare, real.get(`${strategy}:true`)!] : [bare];
  const notes = realRuns.map(
    (r, k) =>
      `Real side${k === 1 ? ', protected' : ''}: ${r.jobs.toLocaleString('en-US')} jobs, ${r.attempts.toLocaleString('en-US')} attempts, ` +
      `${r.abandoned.toLocaleString('en-US')} answers to clients that had gone, ${r.refused} requests refused by the full backlog, ${r.dead} dead; ` +
      `retries started ${r.retryLateMs.p50} ms (median), ${r.retryLateMs.p95} ms (p95), ${r.retryLateMs.max} ms (max) after their scheduled time (${r.retryLateMs.n.toLocaleString('en-US')} retries); ` +
      `breaker opened ${r.protection.opened} times, ${r.protection.deferred.toLocaleString('en-US')} jobs deferred, the budget empty for ${r.protection.budgetExhausted.toLocaleString('en-US')} retries; ` +
      `event-loop delay of the workers' thread p99 ${r.loopDelayMs.p99.toFixed(0)} ms, max ${r.loopDelayMs.max.toFixed(0)} ms; ` +
      `of the server's thread p99 ${r.serverLoopDelayMs.p99.toFixed(0)} ms, max ${r.serverLoopDelayMs.max.toFixed(0)} ms.`,
  );
  if (plainRef)
    notes.push(
      `Plain client at the knee, just before the protected run (${best.concurrency} callers, each calling again the moment its answer arrives; no queue, no Redis; ${plainMs / 1000} s): ` +
        `**${plainRef.goodput.toFixed(1)} ok/s** from ${plainFromS} s (${((100 * plainRef.goodput) / best.perSecond).toFixed(0)} % of the computed best); per second ${plainRef.ok.join(', ')}; ` +
        `event-loop delay of the server's thread p99 ${plainRef.loopDelayMs.p99.toFixed(0)} ms, max ${plainRef.loopDelayMs.max.toFixed(0)} ms.`,
    );
  sections.push(
    `### ${strategy}: per second (sim: simulator, real: requeue; P: protected)\n\n` +
      `${notes.join('\n\n')}\n\n${perSecondTable(runs, params)}`,
  );
}

const command =
  `npm run bench:outage -- ` +
  `--scale ${scale} --strategies ${strategies.join(',')} --duration-ms ${durationMs} --seed ${seed} --scenario ${scenario}` +
  (protect ? ' --protect' : '') +
  (overrideText ? ` --protect-options '${overrideText}'` : '') +
  (control ? ' --control' : '');
const title =
  scenario === 'overload'
    ? `## Steady overload: goodput${protect ? ', bare and with the default protections' : ''}`
    : protect
      ? '## Outage, bare and with the default protections: the simulator against the real system'
      : '## Outage: the simulator against the real system';
const scenarioNote =
  scenario === 'overload'
    ? `The steady overload (\`bench/outage/scenarios.ts\`): no outage; the clients offer ~${offeredPerSecond(params).toFixed(0)} req/s (at the server's minimum latency) to a server whose best is **${best.perSecond.toFixed(1)} req/s with ${best.concurrency} in flight** (its knee: c / latency(c) is highest there and falls past it), i.e. ${(offeredPerSecond(params) / best.perSecond).toFixed(2)}× the knee. Goodput is the mean ok/s from second 10 to the end; "of the server's best" is goodput ÷ ${best.perSecond.toFixed(1)}. The same scaling as the outage applies (× ${scale}: the best and the offered rate do not change with the scale).`
    : `This is seed 004's outage (the README's, with backlog 512) × ${scale}: clients, the server's limit, K and backlog × ${scale}, every duration (gap, timeout, latency, outage, backoff base and cap) × ${scale}, so the request rate stays ~100/s, the latency law's exponent is the same function of the fraction of clients in flight, and a run fits in ${durationMs / 1000} s. The run is shorter than ${scale} × 180 s; the recovery rule (a window of ${recoveryWindowS} s with concurrency ≤ the limit every second and ≥ 90 % of the ok/s before the stop over the window, a second's surplus not counted; the ok/s before the stop at most the clients' offered rate) is the simulator's, applied to both sides' per-second figures by the same function. Goodput after the resume is the mean ok/s from the resume to the end.`;
const protectNote = protect
  ? `- Protected runs: the worker gets \`${JSON.stringify(protections)}\` (\`defaultProtections()\` in \`bench/outage/real-run.ts\`${overrideText ? ', with `--protect-options` over it' : ''}): every option at requeue's defaults, durations not scaled (a user's defaults are a user's defaults); the worker's concurrency limit learned from latency (\`concurrencyLimit\`, from 10 up to the worker's concurrency) and due retries first are on by default, so they are not named (a bare run gets \`concurrencyLimit: false\`). With no \`breakerKey\` the breaker is the queue's: open, it stops the worker fetching until the half-open time. The simulator's protected run gets the same breaker and budget options through the workers' parsers and the same limiter (\`src/policy/limit/gradient.ts\`, its defaults), but models a keyed breaker (a refused request is deferred to the half-open time), not the queue-wide fetch pause.\n`
  : '';
const body = `${title}

Written by \`bench/outage.bench.ts\` on ${startedAt.toISOString()} (the run took ${wallS.toFixed(0)} s).

- Command: \`${command}\`; requeue at ${describeRevision(['src', 'workers'])}
- Machine: \`${machine.uname}\`; CPU: ${machine.cpuModel}, ${machine.cores} cores; 1-minute load average ${loadStart.toFixed(2)} at the start, ${loadEnd.toFixed(2)} at the end (other sessions' work shared the box)
- Node ${machine.node}; redis-server ${machine.redis} (a private redis-server started for the run, appendonly no, hz 100)
- Parameters (both sides): ${describe(params)}. ${scenarioNote}
- Real side: one requeue worker (the built package, concurrency ${Math.min(1000, params.clients)}: every client can wait on the server at once) on the private redis-server. Each of the ${params.clients} clients is a chain of jobs, one at a time: its next job is added an exponential gap (mean ${params.meanGapMs} ms) after the previous one completed, as the simulator's client sends its next request. The handler makes a GET to an in-process HTTP server on 127.0.0.1 (keep-alive agent) and gives up after ${params.timeoutMs} ms (\`RetryableError\`), so requeue's policy schedules the retry (maxAttempts 1000; the simulator's clients never give up). The server (\`bench/outage/latency-server.ts\`, in a worker thread of the same process so that its timers keep time when the workers' event loop is busy) answers first in, first out by the simulator's law, re-evaluated as the concurrency changes, finishes the work of clients that gave up, and is stopped and resumed by its own timers at the simulator's times; requests while stopped wait in its backlog and all start on resume.
${protectNote}- Concurrency is the highest number of requests in flight in the second (a stopped server's backlog not counted), noted on every arrival and at each second's start, as the simulator does. "breaker opened / deferred / budget empty" counts the real worker's \`breaker:opened\`, \`job:deferred\` and \`budget:exhausted\` events.

| strategy | verdicts |
| --- | --- |
${headline.join('\n')}

${summaryTable(scenario, rows, best.perSecond)}

${sections.join('\n\n')}`;

process.stdout.write(`${body}\n`);
const section =
  scenario === 'overload' ? 'overload-bench' : protect ? 'outage-protected-bench' : 'outage-bench';
if (write) await writeResultsSection('bench/RESULTS.md', section, body);
