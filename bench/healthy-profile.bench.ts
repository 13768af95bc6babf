/**
 * Where the healthy path's Node CPU goes: V8 CPU profiles of the timed
 * window of bare BullMQ (on jobs made as requeue's producer makes them) and
 * of requeue's worker, in one process on one private redis-server,
 * alternating, scenario 1 (no failures), 16 slots. Writes one
 * `.cpuprofile` per run to `--out` and prints self time per job by
 * function and by package. `node --import tsx bench/healthy-profile.bench.ts
 * [--jobs N] [--rounds R] [--out DIR] [--variant defaults|both-off]` after `npm run build`.
 */
import { randomUUID } from 'node:crypto';
import { writeFileSync, mkdirSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createRedis } from '../src/redis/connection.js';
import { startRedisServer } from '../src/redis/redis-server.js';
import { bullmqSide } from './scheduler/bullmq-side.js';
import { requeueSide } from './scheduler/requeue-side.js';
import type { RunContext, Side } from './scheduler/side.js';
import { cleanQueue } from './support/clean-queue.js';

process.setSourceMapsEnabled(false);
const { values } = parseArgs({
  options: {
    jobs: { type: 'string', default: '50000' },
    rounds: { type: 'string', default: '2' },
    out: { type: 'string', default: '/tmp/healthy-profile' },
    variant: { type: 'string', default: 'defaults' },
    interval: { type: 'string', default: '250' },
    heap: { type: 'boolean', default: false },
  },
});
const jobs = Number(values.jobs);
const rounds = Number(values.rounds);
const outDir = values.out;
mkdirSync(outDir, { recursive: true });
const requeueOptions: RunContext['requeue'] =
  values.variant === 'both-off'
    ? { concurrencyLimit: 'off', retryOrder: 'fifo' }
    : { concurrencyLimit: 'on', retryOrder: 'first' };

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

interface HeapNode {
  id: number;
  callFrame: ProfileNode['callFrame'];
  selfSize: number;
  children: HeapNode[];
}
interface HeapProfile {
  head: HeapNode;
}

/** A sampled heap profile as a CPU profile whose "time" is bytes allocated (one sample a node). */
function heapAsProfile(h: HeapProfile): Profile {
  const nodes: ProfileNode[] = [];
  const samples: number[] = [];
  const timeDeltas: number[] = [0];
  const walk = (n: HeapNode): void => {
    nodes.push({ id: n.id, callFrame: n.callFrame });
    samples.push(n.id);
    timeDeltas.push(n.selfSize);
    n.children.forEach(walk);
  };
  walk(h.head);
  return { nodes, samples, timeDeltas, startTime: 0, endTime: 0 };
}

const session = new Session();
session.connect();
await session.post('Profiler.enable');
await session.post('HeapProfiler.enable');
await session.post('Profiler.setSamplingInterval', { interval: Number(values.interval) });

const server = await startRedisServer({ appendonly: false });
const admin = createRedis(server.url);

async function profiled(side: Side, n: number, profile: boolean): Promise<Profile | undefined> {
  const queueName = `prof-${randomUUID().slice(0, 8)}`;
  const connection = createRedis(server.url);
  let result: Profile | undefined;
  let cpuStart: NodeJS.CpuUsage | undefined;
  let cpuUs = 0;
  try {
    await side.run({
      scenario: 'no-failures',
      queueName,
      jobs: n,
      concurrency: 16,
      connection,
      timeoutMs: 300_000,
      requeue: requeueOptions,
      probe: () => ({
        start: async () => {
          if (profile && values.heap)
            await session.post('HeapProfiler.startSampling', {
              samplingInterval: 1024,
              includeObjectsCollectedByMajorGC: true,
              includeObjectsCollectedByMinorGC: true,
            });
          else if (profile) await session.post('Profiler.start');
          cpuStart = process.cpuUsage();
        },
        stop: async () => {
          const cpu = process.cpuUsage(cpuStart);
          cpuUs = cpu.user + cpu.system;
          if (profile && values.heap)
            result = heapAsProfile(
              (await session.post('HeapProfiler.stopSampling')).profile as unknown as HeapProfile,
            );
          else if (profile)
            result = (await session.post('Profiler.stop')).profile as unknown as Profile;
        },
      }),
    });
  } finally {
    await connection.quit().catch(() => connection.disconnect());
    await cleanQueue(admin, queueName);
  }
  if (profile) process.stderr.write(`${side.label}: ${(cpuUs / n).toFixed(1)} µs CPU/job\n`);
  return result;
}

/** Self time in µs by function and by package. */
function selfTimes(p: Profile): { byFn: Map<string, number>; byPkg: Map<string, number> } {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const byFn = new Map<string, number>();
  const byPkg = new Map<string, number>();
  for (let i = 0; i < p.samples.length; i++) {
    const node = byId.get(p.samples[i]!)!;
    const dt = p.timeDeltas[i + 1] ?? 0;
    const { functionName, url, lineNumber } = node.callFrame;
    const pkg = packageOf(url, functionName);
    const file = url.replace(/^.*\/(node_modules|dist)\//, '');
    const fn = `${functionName || '(anon)'} ${file}:${lineNumber + 1}`;
    byFn.set(fn, (byFn.get(fn) ?? 0) + dt);
    byPkg.set(pkg, (byPkg.get(pkg) ?? 0) + dt);
  }
  return { byFn, byPkg };
}

function packageOf(url: string, fn: string): string {
  if (url === '') return fn.startsWith('(') ? fn : '(native)';
  if (url.includes('/node_modules/bullmq/')) return 'bullmq';
  if (url.includes('/node_modules/ioredis/')) return 'ioredis';
  if (url.includes('/node_modules/')) return 'node_modules (other)';
  if (url.includes('/dist/src/')) return 'requeue';
  if (url.startsWith('node:')) return 'node:*';
  return 'other';
}

const sides: Side[] = [bullmqSide, requeueSide];
for (const side of sides) await profiled(side, Math.min(jobs, 5_000), false); // warm-up
const totals = sides.map(() => ({
  byFn: new Map<string, number>(),
  byPkg: new Map<string, number>(),
}));
const loadBefore = loadavg()[0]!;
for (let r = 0; r < rounds; r++) {
  for (let s = 0; s < sides.length; s++) {
    const i = (s + r) % sides.length;
    const p = (await profiled(sides[i]!, jobs, true))!;
    // bullmqSide profiles two windows (its own jobs, then requeue's); the last is kept.
    writeFileSync(join(outDir, `${sides[i]!.label}-${r}.cpuprofile`), JSON.stringify(p));
    const { byFn, byPkg } = selfTimes(p);
    for (const [k, v] of byFn) totals[i]!.byFn.set(k, (totals[i]!.byFn.get(k) ?? 0) + v);
    for (const [k, v] of byPkg) totals[i]!.byPkg.set(k, (totals[i]!.byPkg.get(k) ?? 0) + v);
  }
}
const perJob = (us: number): string => (us / (jobs * rounds)).toFixed(2);
const pkgs = new Set([...totals[0]!.byPkg.keys(), ...totals[1]!.byPkg.keys()]);
process.stdout.write(
  `${values.heap ? 'bytes allocated' : 'self time µs'}/job, ${jobs} jobs × ${rounds} rounds, load ${loadBefore.toFixed(1)} → ${loadavg()[0]!.toFixed(1)}\n`,
);
process.stdout.write(`package\tBullMQ\trequeue\n`);
for (const pkg of [...pkgs].sort())
  process.stdout.write(
    `${pkg}\t${perJob(totals[0]!.byPkg.get(pkg) ?? 0)}\t${perJob(totals[1]!.byPkg.get(pkg) ?? 0)}\n`,
  );
const fns = new Set([...totals[0]!.byFn.keys(), ...totals[1]!.byFn.keys()]);
const diffs = [...fns]
  .map((f) => [f, (totals[1]!.byFn.get(f) ?? 0) - (totals[0]!.byFn.get(f) ?? 0)] as const)
  .sort((a, b) => Math.abs(b[1]) - Math.abs(a[1]))
  .slice(0, 60);
process.stdout.write(`\nfunction\tBullMQ\trequeue\trequeue − BullMQ\n`);
for (const [f, d] of diffs)
  process.stdout.write(
    `${f}\t${perJob(totals[0]!.byFn.get(f) ?? 0)}\t${perJob(totals[1]!.byFn.get(f) ?? 0)}\t${perJob(d)}\n`,
  );
session.disconnect();
admin.disconnect();
await server.stop();
