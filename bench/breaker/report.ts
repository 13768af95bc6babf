import { stopBreaker, type TripKind, type TripSample } from '../breaker-stop.js';
import { sideLabels, type SideKey } from '../breaker-throughput.js';
import type { Machine } from '../support/machine.js';
import { formatRate, formatRatio, median } from '../support/stats.js';
import type { Options } from './options.js';

/**
 * `bench/breaker.bench.ts`'s report: per-side runs turned into the throughput
 * and trip-to-stop rows, and the section it writes to bench/RESULTS.md.
 */

/** Per side and run: jobs/s, commands per job, CPU per job. */
export interface SideRuns {
  rate: number[];
  /** Commands sent per job (a script call is one). */
  sentPerJob: number[];
  /** Commands the server executed per job, Lua's own calls included. */
  executedPerJob: number[];
  /** This process's CPU time per job (the worker and the bench), µs. */
  nodeCpuUs: number[];
  /** The server's CPU time per job, µs. */
  redisCpuUs: number[];
  /** The last run's sent commands per job, by name. */
  lastSent: Map<string, number>;
}

export const sideKeys: SideKey[] = ['breaker', 'bullmq', 'requeue'];

export interface Row {
  metric: string;
  breaker: string;
  bullmq: string;
  ratio: string;
  target: string;
  met: string;
}

export function throughputRows(runs: Record<SideKey, SideRuns>): Row[] {
  const sentB = median(runs.breaker.sentPerJob);
  const sentQ = median(runs.bullmq.sentPerJob);
  const execB = median(runs.breaker.executedPerJob);
  const execQ = median(runs.bullmq.executedPerJob);
  const rateB = median(runs.breaker.rate);
  const rateQ = median(runs.bullmq.rate);
  const nodeB = median(runs.breaker.nodeCpuUs);
  const nodeQ = median(runs.bullmq.nodeCpuUs);
  const redisB = median(runs.breaker.redisCpuUs);
  const redisQ = median(runs.bullmq.redisCpuUs);
  return [
    {
      metric: 'Redis commands per job (sent by the clients; a script call is one)',
      breaker: sentB.toFixed(3),
      bullmq: sentQ.toFixed(3),
      ratio: formatRatio(sentB / sentQ),
      target: '≤ 1.10',
      met: sentB / sentQ <= 1.1 ? 'yes' : 'NO',
    },
    {
      metric: 'Redis commands per job (executed by the server, Lua’s own calls included)',
      breaker: execB.toFixed(3),
      bullmq: execQ.toFixed(3),
      ratio: formatRatio(execB / execQ),
      target: '— (reference)',
      met: 'n/a',
    },
    {
      metric: 'throughput, jobs/s',
      breaker: formatRate(rateB),
      bullmq: formatRate(rateQ),
      ratio: formatRatio(rateB / rateQ),
      target: '≥ 0.95',
      met: rateB / rateQ >= 0.95 ? 'yes' : 'NO',
    },
    {
      metric: 'CPU per job in the worker’s process (worker and bench), µs',
      breaker: nodeB.toFixed(1),
      bullmq: nodeQ.toFixed(1),
      ratio: formatRatio(nodeB / nodeQ),
      target: '— (reference)',
      met: 'n/a',
    },
    {
      metric: 'CPU per job in redis-server, µs',
      breaker: redisB.toFixed(1),
      bullmq: redisQ.toFixed(1),
      ratio: formatRatio(redisB / redisQ),
      target: '— (reference)',
      met: 'n/a',
    },
  ];
}

export function stopRows(samples: TripSample[], kinds: TripKind[], workers: number): Row[] {
  const rows: Row[] = [];
  for (const kind of kinds) {
    const stops = samples.filter((s) => s.kind === kind).map((s) => s.stopMs);
    if (stops.length === 0) continue;
    const label =
      kind === 'forced'
        ? 'forced (`BreakerStore.forceOpen`, as `requeue breaker open`)'
        : 'tripped by failures (dependency flipped to 503; from `openedAt`)';
    const med = median(stops);
    const max = Math.max(...stops);
    rows.push(
      {
        metric: `trip → last of ${workers} workers stopped, ${label}, median of ${stops.length}`,
        breaker: `${med} ms`,
        bullmq: '—',
        ratio: '—',
        target: '≤ 100 ms',
        met: med <= 100 ? 'yes' : 'NO',
      },
      {
        metric: `… the same, worst of ${stops.length}`,
        breaker: `${max} ms`,
        bullmq: '—',
        ratio: '—',
        target: '≤ 100 ms',
        met: max <= 100 ? 'yes' : 'NO',
      },
    );
  }
  return rows;
}

function markdownTable(header: string[], cells: string[][]): string {
  return [header, header.map(() => '---'), ...cells].map((r) => `| ${r.join(' | ')} |`).join('\n');
}

export function render(input: {
  machine: Machine;
  options: Options;
  command: string;
  startedAt: Date;
  durationS: number;
  rows: Row[];
  runs: Record<SideKey, SideRuns> | undefined;
  samples: TripSample[];
}): string {
  const { machine, options, rows, runs, samples } = input;
  const lines = [
    '## Circuit breaker: overhead when healthy, and trip → stop',
    '',
    `Written by \`bench/breaker.bench.ts\` on ${input.startedAt.toISOString()} ` +
      `(${input.durationS.toFixed(0)} s). Command: \`${input.command}\``,
    '',
    `- Machine: \`${machine.uname}\``,
    `- CPU: ${machine.cpuModel}, ${machine.cores} cores; load average ${machine.loadAverage.toFixed(2)} at start`,
    `- Node ${machine.node}; redis-server ${machine.redis} (private, appendonly no)`,
    '',
    markdownTable(
      ['metric', 'requeue+breaker', 'bare BullMQ', 'ratio', 'target', 'met?'],
      rows.map((r) => [r.metric, r.breaker, r.bullmq, r.ratio, r.target, r.met]),
    ),
    '',
  ];
  if (runs) {
    lines.push(
      '### How the throughput part was run',
      '',
      `- ${options.jobs} jobs per run, pre-loaded with \`addBulk\`; concurrency ${options.concurrency} on every side; ` +
        `an untimed warm-up run per side, then ${options.repeats} timed runs per side, the order rotating; medians reported.`,
      `- Handlers ${options.dependency ? 'call a healthy HTTP dependency on loopback (one GET each)' : 'return at once (a healthy dependency, no failures), so the figures are the overhead'}. ` +
        'A run is timed from `worker.run()` to the completion event of its last job.',
      '- requeue+breaker: `createWorker(…, { breaker: {} })`, the queue-level breaker with its defaults ' +
        '(outcomes flushed every 100 ms or 64 outcomes). Bare BullMQ: `new Worker` with the same lock settings and job retention.',
      '- Sent: every command this process’s ioredis clients sent over the timed window, a Lua script call counting one. ' +
        'Executed: the server’s `total_commands_processed` difference, which also counts the commands the scripts run.',
      '',
      markdownTable(
        [
          'side',
          'jobs/s (median)',
          'every run, jobs/s',
          'sent/job',
          'executed/job',
          'node CPU µs/job',
          'redis CPU µs/job',
        ],
        sideKeys.map((k) => [
          sideLabels[k],
          formatRate(median(runs[k].rate)),
          runs[k].rate.map(formatRate).join(', '),
          median(runs[k].sentPerJob).toFixed(3),
          median(runs[k].executedPerJob).toFixed(3),
          median(runs[k].nodeCpuUs).toFixed(1),
          median(runs[k].redisCpuUs).toFixed(1),
        ]),
      ),
      '',
      `- Run-to-run spread of jobs/s (fastest / slowest run): ${sideKeys
        .map((k) => `${sideLabels[k]} ${formatRatio(spread(runs[k].rate))}`)
        .join(', ')}; load average ${machine.loadAverage.toFixed(2)} at the start. ` +
        'Where the spread dwarfs the gap between the sides, the jobs/s ratio is mostly noise.',
      `- requeue+breaker sent per job (last run): ${describeSent(runs.breaker.lastSent)}`,
      `- bare BullMQ sent per job (last run): ${describeSent(runs.bullmq.lastSent)}`,
      '',
    );
  }
  if (samples.length > 0) {
    lines.push(
      '### How the trip → stop part was run',
      '',
      `- ${options.workers} worker processes (\`test/fixtures/breaker-worker.ts\`), concurrency ${options.workerConcurrency} each, ` +
        'on a steady stream of jobs (a backlog of 2,000 kept topped up, in batches of 100, on a connection of its own) against a healthy HTTP dependency on loopback; ' +
        `breaker \`${JSON.stringify(stopBreaker)}\`.`,
      '- Each child keeps the time its handler last started a call; 500 ms after a trip the bench asks every child ' +
        '(pub/sub) and reads the answers from a Redis list. Stop time = max(last handler start) − trip time, the same ' +
        'machine clock in every process. Forced: trip time is taken just before `forceOpen`. Failures: the dependency ' +
        "answers 503 until the breaker trips (`consecutiveFailures` 20); trip time is the state's `openedAt`. " +
        'Between trips the breaker is closed by hand and the bench waits until every worker calls again.',
      '',
      markdownTable(
        ['trip', 'kind', 'stop (ms)', 'per worker: last start − trip (ms)'],
        samples.map((s, i) => [
          String(i + 1),
          s.kind,
          String(s.stopMs),
          s.reports.map((r) => `${r.worker} ${r.lastStart - s.tripAt}`).join(', '),
        ]),
      ),
      '',
    );
  }
  return lines.join('\n');
}

/** Fastest over slowest of a side's runs. */
function spread(rates: number[]): number {
  return Math.max(...rates) / Math.min(...rates);
}

export function describeSent(perJob: Map<string, number>): string {
  return (
    [...perJob.entries()]
      .filter(([, v]) => v >= 0.001)
      .sort((a, b) => b[1] - a[1])
      .map(([name, v]) => `${name} ${v.toFixed(3)}`)
      .join(', ') || '—'
  );
}
