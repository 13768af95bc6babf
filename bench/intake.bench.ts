/**
 * The intake API's throughput: `POST /v1/jobs/:queue` on requeue's service
 * (Fastify, zod validation, requeue's producer; a handler queue consuming in
 * the same process) against a minimal Fastify route that calls BullMQ's
 * `Queue.add` directly (a BullMQ Worker consuming in the same process). Same
 * private redis-server, same run, the sides alternating, each server in a
 * process of its own and autocannon in this one. requeue must keep ≥ 0.9×.
 * Run with `npm run bench:intake`; writes its section of bench/RESULTS.md.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { createRedis } from '../src/redis/connection.js';
import { startRedisServer } from '../src/redis/redis-server.js';
import { writeResultsSection } from './support/results-file.js';
import { median } from './support/stats.js';

const { values } = parseArgs({
  options: {
    repeats: { type: 'string', default: '5' },
    duration: { type: 'string', default: '10' },
    connections: { type: 'string', default: '32' },
    concurrency: { type: 'string', default: '16' },
    'dry-run': { type: 'boolean', default: false },
  },
});
const repeats = Number(values.repeats);
const durationSec = Number(values.duration);
const connections = Number(values.connections);
const concurrency = Number(values.concurrency);
const target = 0.9;
const sides = ['requeue', 'bullmq'] as const;
type SideName = (typeof sides)[number];

interface Run {
  rps: number;
  /** The server process's CPU time (user + system) per request, in µs. */
  cpuPerRequestUs: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
}

/** Starts one side's server; resolves with the process and its base URL. */
async function startSide(
  side: SideName,
  redisUrl: string,
  queue: string,
  workers: number,
): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(
    process.execPath,
    ['bench/intake/server.mjs', side, redisUrl, queue, String(workers)],
    { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] },
  );
  let out = '';
  child.stdout!.setEncoding('utf8');
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', (chunk: string) => {
      out += chunk;
      const line = out.split('\n')[0];
      if (out.includes('\n') && line) resolve(line.trim());
    });
    child.once('exit', (code) => reject(new Error(`${side} server exited with ${code}`)));
  });
  return { child, url };
}

/** The CPU time a side's server process has used so far. */
async function cpuOf(child: ChildProcess): Promise<NodeJS.CpuUsage> {
  const reply = once(child, 'message') as Promise<[NodeJS.CpuUsage]>;
  child.send('cpu');
  return (await reply)[0];
}

async function measure(
  side: SideName,
  redisUrl: string,
  round: number,
  workers: number,
): Promise<Run> {
  const queue = `bench-intake-${side}-${workers}-${round}`;
  const { child, url } = await startSide(side, redisUrl, queue, workers);
  try {
    const request = {
      url: `${url}/v1/jobs/${queue}`,
      method: 'POST' as const,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'job', data: { order: 42, items: ['a', 'b'] } }),
    };
    // A short warm-up (JIT, connection pools), then the measured run.
    await autocannon({ ...request, connections, duration: 2 });
    const before = await cpuOf(child);
    const result = await autocannon({ ...request, connections, duration: durationSec });
    const after = await cpuOf(child);
    const cpuUs = after.user + after.system - before.user - before.system;
    return {
      rps: result.requests.average,
      cpuPerRequestUs: cpuUs / Math.max(1, result.requests.total),
      p50: result.latency.p50,
      p99: result.latency.p99,
      non2xx: result.non2xx,
      errors: result.errors,
    };
  } finally {
    child.kill('SIGTERM');
    await once(child, 'exit');
  }
}

const load = loadavg()[0] ?? 0;
const server = await startRedisServer({ appendonly: false });
const admin = createRedis(server.url);
/** Two settings: a worker consuming in the server's process (as the service runs), and none. */
const modes = [
  { key: 'consuming', workers: concurrency },
  { key: 'alone', workers: 0 },
] as const;
type Mode = (typeof modes)[number]['key'];
const runs: Record<Mode, Record<SideName, Run[]>> = {
  consuming: { requeue: [], bullmq: [] },
  alone: { requeue: [], bullmq: [] },
};
try {
  for (let i = 0; i < repeats; i++) {
    const order = i % 2 === 0 ? sides : ([...sides].reverse() as SideName[]);
    for (const mode of modes)
      for (const side of order) {
        const run = await measure(side, server.url, i, mode.workers);
        runs[mode.key][side].push(run);
        await admin.flushall();
        process.stderr.write(
          `run ${i + 1} ${mode.key} ${side}: ${Math.round(run.rps)} req/s, ${Math.round(run.cpuPerRequestUs)} µs CPU/req, p50 ${run.p50} ms, p99 ${run.p99} ms` +
            `${run.non2xx + run.errors > 0 ? `, ${run.non2xx} non-2xx, ${run.errors} errors` : ''}\n`,
        );
      }
  }
} finally {
  admin.disconnect();
  await server.stop();
}

const rps = (mode: Mode, side: SideName) => median(runs[mode][side].map((r) => r.rps));
const lat = (mode: Mode, side: SideName, key: 'p50' | 'p99') =>
  median(runs[mode][side].map((r) => r[key]));
const ratio = (mode: Mode) => rps(mode, 'requeue') / rps(mode, 'bullmq');
const cpu = (mode: Mode, side: SideName) => median(runs[mode][side].map((r) => r.cpuPerRequestUs));
/** Requests per server CPU-second, requeue's over the route's: the ratio the machine's load moves least. */
const cpuRatio = (mode: Mode) => cpu(mode, 'bullmq') / cpu(mode, 'requeue');
const perRun = (mode: Mode) =>
  runs[mode].requeue.map((r, i) => (r.rps / runs[mode].bullmq[i]!.rps).toFixed(2)).join(', ');
const bad = modes.reduce(
  (n, m) =>
    n + sides.reduce((k, s) => k + runs[m.key][s].reduce((j, r) => j + r.non2xx + r.errors, 0), 0),
  0,
);
const row = (mode: Mode, label: string) => {
  const r = ratio(mode);
  return `| ${label} | ${Math.round(rps(mode, 'requeue')).toLocaleString('en-US')} (p50 ${lat(mode, 'requeue', 'p50')} ms, p99 ${lat(mode, 'requeue', 'p99')} ms) | ${Math.round(rps(mode, 'bullmq')).toLocaleString('en-US')} (p50 ${lat(mode, 'bullmq', 'p50')} ms, p99 ${lat(mode, 'bullmq', 'p99')} ms) | **${r.toFixed(2)}** | ${perRun(mode)} | ${r >= target ? 'yes' : 'no'} | ${Math.round(cpu(mode, 'requeue'))} / ${Math.round(cpu(mode, 'bullmq'))} µs = **${cpuRatio(mode).toFixed(2)}** |`;
};
const body = `## Intake API: \`POST /v1/jobs/:queue\` against a minimal Fastify route calling BullMQ's \`Queue.add\`

requeue's intake (Fastify, the body validated by its zod schema through fastify-type-provider-zod, requeue's producer: id, policy, retention options) against a minimal Fastify route that calls BullMQ's \`Queue.add\` directly, target ≥ ${target}×. Each side's server in a process of its own; one private redis-server; autocannon in the bench process, ${connections} connections, ${durationSec} s after a 2 s warm-up; the sides alternating, ${repeats} runs each, medians. "Consuming": the requeue service as \`npm start\` runs it (a handler queue's worker, concurrency ${concurrency}, in the same process) against the route with a BullMQ Worker of the same concurrency in its process; "alone": the service's intake server on a requeue queue, nothing consuming, against the bare route.

| setting | requeue req/s | Fastify + \`Queue.add\` req/s | ratio | per-run ratios | ≥ ${target}? | server CPU per request, requeue / route (requests per CPU-second ratio) |
|---|---|---|---|---|---|---|
${row('consuming', 'consuming (as the service runs)')}
${row('alone', 'intake alone')}

Non-2xx answers and socket errors over all runs: ${bad}.

Machine: ${cpus()[0]?.model ?? 'unknown'}, ${availableParallelism()} cores, Node ${process.version}; 1-minute load average ${load.toFixed(2)} when the run started (servers, Redis and autocannon share the cores). Run with \`npm run bench:intake\`.`;
process.stdout.write(`${body}\n`);
if (!values['dry-run']) await writeResultsSection('bench/RESULTS.md', 'intake', body);
