/**
 * How fast `requeue simulate` is: the contention scenario, 100 clients × 100
 * trials × 4 strategies, as a whole `requeue simulate` process against a
 * fast Python port of the same model (bench/simulate/contention.py: heapq
 * agenda of tuples, no object per event) and the object-per-client port the
 * bench used before (contention_plain.py), the runs alternating, median of
 * each, in wall time and in CPU time (the children's user + system time from
 * /proc/self/stat, which a shared machine's load disturbs less). Also the
 * simulator's events per second in-process. Run with `npm run
 * bench:simulate`; writes its section of bench/RESULTS.md.
 */
import { execSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
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
const plain = ['bench/simulate/contention_plain.py', String(clients), String(trials), '7'];

/** CPU time of this process's waited-for children, in ms (Linux: /proc/self/stat cutime + cstime). */
function childrenCpuMs(): number {
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
  // After "pid (comm) ", cutime and cstime are fields 14 and 15 (1-based from state = 1).
  const ticks = Number(fields[13]) + Number(fields[14]);
  return (ticks * 1000) / clockTicks;
}
const clockTicks = Number(execSync('getconf CLK_TCK', { encoding: 'utf8' }).trim()) || 100;

interface Timing {
  wall: number[];
  cpu: number[];
  out: string;
}

function timed(command: string, args: string[], into: Timing): void {
  const cpu = childrenCpuMs();
  const start = performance.now();
  const run = spawnSync(command, args, { encoding: 'utf8' });
  into.wall.push(performance.now() - start);
  into.cpu.push(childrenCpuMs() - cpu);
  if (run.status !== 0) throw new Error(`${command} ${args.join(' ')} failed: ${run.stderr}`);
  into.out = run.stdout;
}

const uptime = (): string => execSync('uptime', { encoding: 'utf8' }).trim();
const uptimeBefore = uptime();
const load = loadavg()[0] ?? 0;
const ours: Timing = { wall: [], cpu: [], out: '' };
const fast: Timing = { wall: [], cpu: [], out: '' };
const slow: Timing = { wall: [], cpu: [], out: '' };
const sides: [Timing, string, string[]][] = [
  [ours, process.execPath, node],
  [fast, 'python3', python],
  [slow, 'python3', plain],
];
for (let i = 0; i < repeats; i++) {
  // Each round in another order, so no side always runs first.
  for (let k = 0; k < sides.length; k++) {
    const [into, command, args] = sides[(i + k) % sides.length]!;
    timed(command, args, into);
  }
  process.stderr.write(
    `run ${i + 1}: node ${ours.wall[i]!.toFixed(0)} ms (cpu ${ours.cpu[i]!.toFixed(0)}), ` +
      `python ${fast.wall[i]!.toFixed(0)} ms (cpu ${fast.cpu[i]!.toFixed(0)}), ` +
      `plain python ${slow.wall[i]!.toFixed(0)} ms (cpu ${slow.cpu[i]!.toFixed(0)})\n`,
  );
}
const uptimeAfter = uptime();

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

const figures = (out: string) =>
  (JSON.parse(out) as { strategies: { strategy: string; calls: number; timeMs: number }[] })
    .strategies;
const oursRows = figures(ours.out);
const theirs = figures(fast.out);
const rows = oursRows.map((o, i) => {
  const p = theirs[i]!;
  return `| ${o.strategy} | ${o.calls.toFixed(1)} | ${p.calls.toFixed(1)} | ${(o.timeMs / 1000).toFixed(2)} s | ${(p.timeMs / 1000).toFixed(2)} s |`;
});
const ms = (values: number[]): string => `${median(values).toFixed(0)} ms`;
const ratio = (them: number[], us: number[]): string =>
  `${(median(them) / median(us)).toFixed(1)}×`;
const body = `## Simulator: \`requeue simulate\` against a fast Python port of the same model

The contention scenario, ${clients} clients × ${trials} trials × ${strategies.length} strategies (${strategies.join(', ')}), as a whole process each (start-up included), each round in another order, ${repeats} rounds, median; CPU is the process's user + system time:

| | wall | CPU | requeue is, wall | CPU |
|---|---|---|---|---|
| \`node ${node.join(' ')}\` | ${ms(ours.wall)} | ${ms(ours.cpu)} | | |
| \`python3 ${python.join(' ')}\` (fast port: heapq of tuples, one heapreplace per event) | ${ms(fast.wall)} | ${ms(fast.cpu)} | **${ratio(fast.wall, ours.wall)}** | **${ratio(fast.cpu, ours.cpu)}** |
| \`python3 ${plain.join(' ')}\` (the port this bench used before: an object per client, bound methods) | ${ms(slow.wall)} | ${ms(slow.cpu)} | ${ratio(slow.wall, ours.wall)} | ${ratio(slow.cpu, ours.cpu)} |

The simulator alone (in-process, no start-up): ${events.toLocaleString('en-US')} events in all, **${Math.round(bestRate).toLocaleString('en-US')} events/s** (best of 3).

Both implement the same model (read, then write with the version read; every message \`|normal(10, 2)|\` ms by Box-Muller; requeue's formulas, retry index from 0; one event pending per client) with different random streams, so their figures agree in distribution, not digit for digit:

| strategy | calls (requeue) | calls (Python) | time (requeue) | time (Python) |
|---|---|---|---|---|
${rows.join('\n')}

Machine: ${cpus()[0]?.model ?? 'unknown'}, ${availableParallelism()} cores, Node ${process.version}, ${spawnSync('python3', ['--version'], { encoding: 'utf8' }).stdout.trim()}; 1-minute load average ${load.toFixed(2)} when the run started (\`${uptimeBefore}\`; after: \`${uptimeAfter}\`; other work shared the box, slowing every side alike). Run with \`npm run bench:simulate\`.`;
process.stdout.write(`${body}\n`);
if (values.write) await writeResultsSection('bench/RESULTS.md', 'simulate', body);
