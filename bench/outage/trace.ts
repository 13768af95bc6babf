/**
 * One real run of the outage bench, traced: per second, what the clients got
 * (ok), what the server held (in flight: min, time-weighted mean, max; its
 * arrivals and answers), the worker's limit (min/max as attempts ended), the
 * handlers in flight, and the stalls of the workers' event loop (the longest,
 * and their sum). For finding where goodput goes; prints, writes nothing.
 *
 * `npm run build && node --import tsx bench/outage/trace.ts [--scenario overload]
 * [--strategy fixed] [--bare] [--duration-ms 40000] [--json /tmp/trace.json]`.
 */
import { writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import type * as Connection from '../../src/redis/connection.js';
import type * as RedisServer from '../../src/redis/redis-server.js';
import type * as Policy from '../../src/policy/retry-policy.js';
import type * as Random from '../../src/util/random.js';
import type { SimStrategy } from '../../src/simulate/sim-strategy.js';
import { runReal } from './real-run.js';
import { scenarioParams, type Scenario } from './scenarios.js';

const { values } = parseArgs({
  options: {
    scenario: { type: 'string', default: 'overload' },
    strategy: { type: 'string', default: 'fixed' },
    bare: { type: 'boolean', default: false },
    'duration-ms': { type: 'string', default: '40000' },
    seed: { type: 'string', default: '7' },
    'protect-options': { type: 'string', default: '' },
    json: { type: 'string', default: '' },
  },
});
const dist = (path: string): Promise<unknown> => import(`../../dist/src/${path}` as string);
const { retryPolicySchema } = (await dist('policy/retry-policy.js')) as typeof Policy;
const { seededRandom } = (await dist('util/random.js')) as typeof Random;
const { createRedis } = (await dist('redis/connection.js')) as typeof Connection;
const { startRedisServer } = (await dist('redis/redis-server.js')) as typeof RedisServer;

const durationMs = Number(values['duration-ms']);
const seed = Number(values.seed);
const params = scenarioParams(values.scenario as Scenario, 0.5, durationMs, seed, (input: object) =>
  retryPolicySchema.parse(input),
);
const load0 = loadavg()[0]!;
const redis = await startRedisServer({ appendonly: false });
const connection = createRedis(redis.url);
let run;
const cpu0 = process.cpuUsage();
try {
  run = await runReal(
    values.strategy as SimStrategy,
    params,
    connection,
    'trace',
    seededRandom((seed * 7919) >>> 0),
    {
      protect: !values.bare,
      overrides: values['protect-options'] ? JSON.parse(values['protect-options']) : {},
      trace: true,
    },
  );
} finally {
  connection.disconnect();
  await redis.stop();
}
const cpu = process.cpuUsage(cpu0);
const trace = run.trace!;
if (values.json) writeFileSync(values.json, JSON.stringify({ params, run }));

const seconds = Math.ceil(durationMs / 1000);
const row = (): {
  ok: number;
  arrivals: number;
  answers: number;
  min: number;
  max: number;
  area: number;
  limMin: number;
  limMax: number;
  handlersMax: number;
  stallMax: number;
  stallSum: number;
} => ({
  ok: 0,
  arrivals: 0,
  answers: 0,
  min: Infinity,
  max: 0,
  area: 0,
  limMin: Infinity,
  limMax: 0,
  handlersMax: 0,
  stallMax: 0,
  stallSum: 0,
});
const rows = Array.from({ length: seconds }, row);
const at = (ms: number): (typeof rows)[number] | undefined => rows[Math.floor(ms / 1000)];
// The server's in flight, time-weighted per second.
let c = 0;
let last = 0;
const advance = (to: number): void => {
  while (last < to) {
    const end = Math.min(to, (Math.floor(last / 1000) + 1) * 1000);
    const r = at(last);
    if (r) {
      r.area += c * (end - last);
      r.min = Math.min(r.min, c);
      r.max = Math.max(r.max, c);
    }
    last = end;
  }
};
for (const e of trace.server) {
  const t = Math.abs(e);
  advance(t);
  if (e >= 0) {
    c++;
    if (at(t)) at(t)!.arrivals++;
  } else {
    c--;
    if (at(t)) at(t)!.answers++;
  }
  const r = at(t);
  if (r) r.max = Math.max(r.max, c);
}
advance(durationMs);
// Handlers in flight: +1 at a start, −1 at an end.
const edges = trace.attempts.flatMap(([s, e]) => [
  [s!, 1],
  [e!, -1],
]);
edges.sort((a, b) => a[0]! - b[0]! || a[1]! - b[1]!);
let h = 0;
for (const [t, d] of edges) {
  h += d!;
  const r = at(t!);
  if (r) r.handlersMax = Math.max(r.handlersMax, h);
}
for (const [, e, limit, ok] of trace.attempts) {
  const r = at(e!);
  if (!r) continue;
  if (ok) r.ok++;
  r.limMin = Math.min(r.limMin, limit!);
  r.limMax = Math.max(r.limMax, limit!);
}
for (const [t, ms] of trace.stalls) {
  const r = at(t!);
  if (!r) continue;
  r.stallMax = Math.max(r.stallMax, ms!);
  r.stallSum += ms!;
}
const f = (x: number, d = 0): string => (Number.isFinite(x) ? x.toFixed(d) : '–');
console.log(
  `${values.scenario} ${values.strategy} ${values.bare ? 'bare' : 'protected'} ${durationMs / 1000} s; load ${load0.toFixed(2)} → ${loadavg()[0]!.toFixed(2)}; loop p99 ${run.loopDelayMs.p99.toFixed(0)} ms max ${run.loopDelayMs.max.toFixed(0)} ms; server loop p99 ${run.serverLoopDelayMs.p99.toFixed(0)} max ${run.serverLoopDelayMs.max.toFixed(0)}`,
);
const from = trace.cpu.find(([t]) => t! >= 10_000);
const to = trace.cpu.at(-1);
const attemptsAfter = trace.attempts.filter(([, e]) => e! >= from![0]! && e! <= to![0]!).length;
console.log(
  `process CPU (both threads): ${((cpu.user + cpu.system) / 1000).toFixed(0)} ms in all; from ${(from![0]! / 1000).toFixed(1)} s to ${(to![0]! / 1000).toFixed(1)} s ${(to![1]! - from![1]!).toFixed(0)} ms for ${attemptsAfter} attempts: ${((1000 * (to![1]! - from![1]!)) / attemptsAfter).toFixed(0)} µs per attempt`,
);
console.log(
  't | ok | server arrivals | answers | in flight min/mean/max | limit min–max | handlers max | stall max / sum (ms)',
);
rows.forEach((r, t) =>
  console.log(
    `${t} | ${r.ok} | ${r.arrivals} | ${r.answers} | ${f(r.min)}/${f(r.area / 1000, 1)}/${r.max} | ${f(r.limMin, 1)}–${f(r.limMax, 1)} | ${r.handlersMax} | ${f(r.stallMax)} / ${f(r.stallSum)}`,
  ),
);
const tail = rows.slice(10);
console.log(
  `goodput from 10 s: ${(tail.reduce((n, r) => n + r.ok, 0) / tail.length).toFixed(1)} ok/s`,
);
