/**
 * How fast `requeue simulate` is: the contention scenario, 100 clients × 100
 * trials × 4 strategies, as a whole `requeue simulate` process against the
 * straightforward Python implementation of the same model
 * (bench/simulate/contention.py), the runs alternating, median of each. Also
 * the simulator's events per second in-process. Run with
 * `npm run bench:simulate`; writes its section of bench/RESULTS.md.
 */
import { spawnSync } from 'node:child_process';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import type * as Contention from '../src/simulate/contention.js';
import type * as Policy from '../src/policy/retry-policy.js';
import type { SimStrategy } from '../src/simulate/sim-strategy.js';
import { writeResultsSection } from './support/results-file.js';
import { median } from './support/stats.js';

const { values } = parseArgs({
  options: {
    repeats: { type: 'string', default: '5' },
    write: { type: 'boolean', default: true },
  },
});
const repeats = Number(values.repeats);
const strategies: SimStrategy[] = [
  'exponential',
  'full-jitter',
  'equal-jitter',
  'decorrelated-jitter',
];
const clients = 100;
const trials = 100;

const node = [
  'dist/src/cli/main.js',
  'simulate',
  '--scenario',
  'contention',
  '--clients',
  String(clients),
  '--trials',
  String(trials),
  '--strategies',
  strategies.join(','),
  '--json',
];
const python = ['bench/simulate/contention.py', String(clients), String(trials), '7'];

function timed(command: string, args: string[]): { ms: number; out: string } {
  const start = performance.now();
  const run = spawnSync(command, args, { encoding: 'utf8' });
  const ms = performance.now() - start;
  if (run.status !== 0) throw new Error(`${command} ${args.join(' ')} failed: ${run.stderr}`);
  return { ms, out: run.stdout };
}

const load = loadavg()[0] ?? 0;
const nodeMs: number[] = [];
const pythonMs: number[] = [];
let nodeOut = '';
let pythonOut = '';
for (let i = 0; i < repeats; i++) {
  const first = i % 2 === 0;
  if (first) ({ ms: nodeMs[i], out: nodeOut } = timed(process.execPath, node) as never);
  ({ ms: pythonMs[i], out: pythonOut } = timed('python3', python) as never);
  if (!first) ({ ms: nodeMs[i], out: nodeOut } = timed(process.execPath, node) as never);
  process.stderr.write(
    `run ${i + 1}: node ${nodeMs[i]!.toFixed(0)} ms, python ${pythonMs[i]!.toFixed(0)} ms\n`,
  );
}

// Events per second, in-process (no start-up), measured on the built code the CLI runs
// (not through tsx's loader): the best of a few runs.
const { simulateContention } = (await import(
  '../dist/src/simulate/contention.js' as string
)) as typeof Contention;
const { retryPolicySchema } = (await import(
  '../dist/src/policy/retry-policy.js' as string
)) as typeof Policy;
const policy = retryPolicySchema.parse({ baseMs: 5, capMs: 2000 });
let bestRate = 0;
let events = 0;
for (let i = 0; i < 3; i++) {
  const start = performance.now();
  const results = simulateContention(strategies, {
    clients,
    trials,
    seed: 7,
    netMeanMs: 10,
    netSdMs: 2,
    policy,
  });
  const ms = performance.now() - start;
  events = results.reduce((n, r) => n + r.events, 0);
  bestRate = Math.max(bestRate, (events * 1000) / ms);
}

const nodeMedian = median(nodeMs);
const pythonMedian = median(pythonMs);
const ours = (
  JSON.parse(nodeOut) as { strategies: { strategy: string; calls: number; timeMs: number }[] }
).strategies;
const theirs = (
  JSON.parse(pythonOut) as { strategies: { strategy: string; calls: number; timeMs: number }[] }
).strategies;
const rows = ours.map((o, i) => {
  const p = theirs[i]!;
  return `| ${o.strategy} | ${o.calls.toFixed(1)} | ${p.calls.toFixed(1)} | ${(o.timeMs / 1000).toFixed(2)} s | ${(p.timeMs / 1000).toFixed(2)} s |`;
});
const body = `## Simulator: \`requeue simulate\` against a straightforward Python implementation

The contention scenario, ${clients} clients × ${trials} trials × ${strategies.length} strategies (${strategies.join(', ')}), as a whole process each (start-up included), alternating, ${repeats} runs each, median:

| | wall time | |
|---|---|---|
| \`node ${node.join(' ')}\` | ${nodeMedian.toFixed(0)} ms | |
| \`python3 ${python.join(' ')}\` | ${pythonMedian.toFixed(0)} ms | |
| **speed-up** | **${(pythonMedian / nodeMedian).toFixed(1)}×** | |

The simulator alone (in-process, no start-up): ${events.toLocaleString('en-US')} events in all, **${Math.round(bestRate).toLocaleString('en-US')} events/s** (best of 3).

Both implement the same model (read, then write with the version read; every message \`|normal(10, 2)|\` ms; requeue's formulas, retry index from 0) with different random streams, so their figures agree in distribution, not digit for digit:

| strategy | calls (requeue) | calls (Python) | time (requeue) | time (Python) |
|---|---|---|---|---|
${rows.join('\n')}

Machine: ${cpus()[0]?.model ?? 'unknown'}, ${availableParallelism()} cores, Node ${process.version}, ${spawnSync('python3', ['--version'], { encoding: 'utf8' }).stdout.trim()}; 1-minute load average ${load.toFixed(2)} when the run started (other work shared the box, slowing both sides alike). Run with \`npm run bench:simulate\`.`;
process.stdout.write(`${body}\n`);
if (values.write) await writeResultsSection('bench/RESULTS.md', 'simulate', body);
