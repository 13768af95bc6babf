import { totalCalls } from '../support/command-counter.js';
import type { CostSample } from '../support/cost-probe.js';
import type { Machine } from '../support/machine.js';
import { formatRate, formatRatio, median } from '../support/stats.js';
import type { BenchOptions } from './options.js';
import { metricIds, metrics, type MetricId, type Target } from './scenarios.js';

export type SideKey = 'requeue' | 'bullmq';

/** What one timed window of one run measured. */
export interface Sample {
  jobs: number;
  elapsedMs: number;
  cost: CostSample | undefined;
}

/** Every sample, by results row and side, in run order. */
export type Samples = Partial<Record<MetricId, Record<SideKey, Sample[]>>>;

/** One results row, medians computed. */
export interface Row {
  id: MetricId;
  label: string;
  reference: string;
  /** Median jobs/s. */
  requeue: number;
  bullmq: number;
  /** The median of the per-repeat ratios. */
  ratio: number;
  /** Every repeat's requeue/BullMQ ratio, in run order: the spread. */
  ratios: number[];
  target: Target;
  met: boolean | undefined;
}

/** Jobs per second of a sample. */
export function rate(sample: Sample): number {
  return (sample.jobs * 1000) / sample.elapsedMs;
}

/** The medians of each row that ran. */
export function summarise(samples: Samples): Row[] {
  const rows: Row[] = [];
  for (const id of metricIds) {
    const s = samples[id];
    if (!s) continue;
    const spec = metrics[id];
    const requeue = median(s.requeue.map(rate));
    const bullmq = median(s.bullmq.map(rate));
    const ratios = pairedRatios(s.requeue, s.bullmq);
    const ratio = median(ratios);
    rows.push({
      id,
      label: spec.label,
      reference: spec.reference,
      requeue,
      bullmq,
      ratio,
      ratios,
      target: spec.target,
      met: isMet(spec.target, requeue, ratio),
    });
  }
  return rows;
}

/**
 * Each repeat's requeue/BullMQ ratio; the row's ratio is their median. The
 * two runs of a repeat follow each other, so a load change on the machine
 * between repeats hits both sides of a pair alike and cancels out of its ratio.
 */
export function pairedRatios(requeue: Sample[], bullmq: Sample[]): number[] {
  const pairs = Math.min(requeue.length, bullmq.length);
  return Array.from({ length: pairs }, (_, i) => rate(requeue[i]!) / rate(bullmq[i]!));
}

/** `0.91–1.12`: the lowest and highest per-repeat ratio. */
export function ratioRange(ratios: readonly number[]): string {
  if (ratios.length === 0) return '—';
  return `${formatRatio(Math.min(...ratios))}–${formatRatio(Math.max(...ratios))}`;
}

export function describeTarget(target: Target): string {
  switch (target.kind) {
    case 'ratio':
      return `ratio ≥ ${target.min.toFixed(2)}`;
    case 'rate':
      return `≥ ${formatRate(target.min)} jobs/s`;
    case 'reference':
      return '— (reference)';
  }
}

/** Whether a row meets its target; undefined for a reference row. */
function isMet(target: Target, requeue: number, ratio: number): boolean | undefined {
  switch (target.kind) {
    case 'ratio':
      return ratio >= target.min;
    case 'rate':
      return requeue >= target.min;
    case 'reference':
      return undefined;
  }
}

function describeMet(met: boolean | undefined): string {
  return met === undefined ? 'n/a' : met ? 'yes' : 'NO';
}

/** A table: a header and rows of cells. */
export interface Table {
  header: string[];
  cells: string[][];
}

/** scenario | requeue jobs/s | BullMQ jobs/s | ratio | ratio range | target | met? */
export function resultsTable(rows: Row[]): Table {
  return {
    header: [
      'scenario',
      'requeue jobs/s',
      'BullMQ jobs/s',
      'ratio',
      'ratio range',
      'target',
      'met?',
    ],
    cells: rows.map((r) => [
      r.label,
      formatRate(r.requeue),
      formatRate(r.bullmq),
      formatRatio(r.ratio),
      ratioRange(r.ratios),
      describeTarget(r.target),
      describeMet(r.met),
    ]),
  };
}

/** The median of a per-job cost over a row's samples of one side. */
export function medianCost(samples: Sample[], pick: (cost: CostSample) => number): number {
  const values = samples.flatMap((s) => (s.cost ? [pick(s.cost) / s.jobs] : []));
  return median(values);
}

export const sentPerRun = (c: CostSample): number => totalCalls(c.sent);
export const executedPerRun = (c: CostSample): number => totalCalls(c.executed);

/** Scenario 1's Redis commands per job: side | sent | executed, and requeue/BullMQ. */
export function commandsTable(samples: Samples): Table | undefined {
  const s = samples['no-failures'];
  if (!s) return undefined;
  const sent = [medianCost(s.requeue, sentPerRun), medianCost(s.bullmq, sentPerRun)] as const;
  const executed = [
    medianCost(s.requeue, executedPerRun),
    medianCost(s.bullmq, executedPerRun),
  ] as const;
  return {
    header: ['side', 'commands sent/job', 'commands executed/job (Lua included)'],
    cells: [
      ['requeue', sent[0].toFixed(2), executed[0].toFixed(2)],
      ['BullMQ', sent[1].toFixed(2), executed[1].toFixed(2)],
      ['ratio', formatRatio(sent[0] / sent[1]), formatRatio(executed[0] / executed[1])],
    ],
  };
}

/** Every row's cost per job, both sides: commands sent and executed, CPU of Node and Redis. */
export function costTable(samples: Samples): Table {
  const cells: string[][] = [];
  for (const id of metricIds) {
    const s = samples[id];
    if (!s) continue;
    const pair = (pick: (c: CostSample) => number, digits: number): string =>
      `${medianCost(s.requeue, pick).toFixed(digits)} / ${medianCost(s.bullmq, pick).toFixed(digits)}`;
    cells.push([
      metrics[id].label,
      pair(sentPerRun, 2),
      pair(executedPerRun, 1),
      pair((c) => c.nodeCpuUs, 1),
      pair((c) => c.redisCpuUs, 1),
    ]);
  }
  return {
    header: [
      'scenario',
      'commands sent/job',
      'commands executed/job',
      'Node CPU µs/job',
      'Redis CPU µs/job',
    ],
    cells,
  };
}

/** `evalsha:moveToFinished 1.00, bzpopmin 0.01, …`: the last sample's commands sent per job. */
export function describeSent(samples: Sample[] | undefined): string {
  const last = samples?.findLast((s) => s.cost !== undefined);
  if (!last?.cost) return '—';
  const described = [...last.cost.sent.entries()]
    .map(([name, calls]) => [name, calls / last.jobs] as const)
    .filter(([, perJob]) => perJob >= 0.005)
    .sort((a, b) => b[1] - a[1])
    .map(([name, perJob]) => `${name.replace(/^evalsha:/, '')} ${perJob.toFixed(2)}`)
    .join(', ');
  return described || 'under 0.005 of any command';
}

/** A markdown table. */
export function markdownTable({ header, cells }: Table): string {
  return [header, header.map(() => '---'), ...cells].map((r) => `| ${r.join(' | ')} |`).join('\n');
}

/** Everything a report of one benchmark run is made of. */
export interface RunReport {
  machine: Machine;
  options: BenchOptions;
  redisSource: string;
  privateRedis: boolean;
  command: string;
  startedAt: Date;
  durationS: number;
  loadAfter: number;
  /** The commit of the measured code, as {@link describeRevision} puts it. */
  revision: string;
  samples: Samples;
}

/** The markdown section this benchmark owns in the results file. */
export function renderMarkdown(input: RunReport): string {
  const { machine, options, samples } = input;
  const rows = summarise(samples);
  const lines = [
    '## Scheduler: requeue vs bare BullMQ',
    '',
    `Written by \`bench/scheduler.bench.ts\` on ${input.startedAt.toISOString()} ` +
      `(the run took ${input.durationS.toFixed(0)} s).`,
    '',
    `- Command: \`${input.command}\`; requeue at ${input.revision}`,
    `- Machine: \`${machine.uname}\``,
    `- CPU: ${machine.cpuModel}, ${machine.cores} cores; 1-minute load average ` +
      `${machine.loadAverage.toFixed(2)} at the start, ${input.loadAfter.toFixed(2)} at the end`,
    `- Node ${machine.node}; redis-server ${machine.redis} (${input.redisSource})`,
    `- Concurrency ${options.concurrency} on both sides; jobs per run: ${options.jobs} ` +
      `(no failures), ${options.retryJobs} (retries), ${options.dlqJobs} (DLQ and replay); ` +
      `median of ${options.repeats} runs per side after an untimed warm-up, the side that ` +
      'goes first alternating.',
    '- Handlers return (or throw) at once, so the figures are the scheduler’s overhead. Jobs ' +
      'are pre-loaded with `addBulk`; a run is timed from `worker.run()` to the event of its ' +
      'last job (`job:completed` / `job:dead-lettered` for requeue, `completed` / `failed` for ' +
      'BullMQ). Both sides keep finished jobs alike (7 days / 10,000 jobs). Both run built ' +
      'code: requeue from its own `dist/` (as the package `requeue`), BullMQ from its published build. ' +
      'Source maps are off in the bench process (tsx turns them on): with them, every `err.stack` ' +
      'BullMQ reads for a failure it stores costs about 3× more, a cost of the harness, not of BullMQ.',
    '- requeue’s policy in scenarios 2–3: `full-jitter`, baseMs 1, capMs 5, maxAttempts 5. ' +
      'BullMQ: `attempts: 5, backoff: { type: "exponential", delay: 1, jitter: 1 }`. So ' +
      'BullMQ’s first retry waits ⌊random·1⌋ = 0 ms and goes straight back to `wait` ' +
      '(`retryJob`), its later ones 0–1 and 0–3 ms; requeue’s wait 0–1, 0–2, 0–4 ms (rounded), ' +
      'always through the delayed set.',
    '',
    markdownTable(resultsTable(rows)),
    '',
    'jobs/s: the median of the runs. ratio: the median of the per-repeat ratios ' +
      '(each requeue run against the BullMQ run next to it), which is steadier than the ratio ' +
      'of the medians when other work shares the machine; ratio range: the lowest and highest ' +
      'of those per-repeat ratios.',
    '',
    'What the BullMQ column measures:',
    '',
    ...rows.map((r) => `- ${r.label}: ${r.reference}`),
    '',
    'Every run, in jobs/s, in run order, and each repeat’s ratio (4c’s requeue runs are 4b’s):',
    '',
    markdownTable({
      header: ['scenario', 'requeue', 'BullMQ', 'ratio per repeat'],
      cells: rows.map((r) => [
        r.label,
        (samples[r.id]?.requeue ?? []).map((s) => formatRate(rate(s))).join(', '),
        (samples[r.id]?.bullmq ?? []).map((s) => formatRate(rate(s))).join(', '),
        r.ratios.map(formatRatio).join(', '),
      ]),
    }),
  ];
  const behind = rows.filter((r) => r.met === false);
  if (behind.length > 0) {
    lines.push(
      '',
      '**Targets missed in this run** (the costs per job below say where the time goes):',
      '',
      ...behind.map((r) => {
        const s = samples[r.id]!;
        const cost = (pick: (c: CostSample) => number, digits: number): string =>
          `${medianCost(s.requeue, pick).toFixed(digits)} vs ${medianCost(s.bullmq, pick).toFixed(digits)}`;
        return (
          `- ${r.label}: ratio ${formatRatio(r.ratio)} against ${describeTarget(r.target)}. ` +
          `Per job, requeue vs BullMQ: ${cost(sentPerRun, 2)} commands sent, ` +
          `${cost((c) => c.nodeCpuUs, 1)} µs of Node CPU, ${cost((c) => c.redisCpuUs, 1)} µs ` +
          'of Redis CPU.'
        );
      }),
    );
  }
  const commands = commandsTable(samples);
  if (commands) {
    lines.push(
      '',
      '### Redis commands per job, scenario 1 (no failures)',
      '',
      'Sent: the commands the ioredis clients sent over the timed window (a Lua script call ' +
        'counts once). Executed: the server’s `INFO commandstats` difference, the scripts’ own ' +
        'calls included' +
        (input.privateRedis ? '.' : ' — on a shared server other clients count too.'),
      '',
      markdownTable(commands),
      '',
      `- requeue sent per job: ${describeSent(samples['no-failures']?.requeue)}`,
      `- BullMQ sent per job: ${describeSent(samples['no-failures']?.bullmq)}`,
    );
  }
  lines.push(
    '',
    '### Cost per job, every scenario (median; requeue / BullMQ)',
    '',
    'CPU time over the timed window per job: Node is this process (both the worker and the ' +
      'bench), Redis is the server (exact only on a private one). Under a busy machine these ' +
      'vary less than jobs/s do.',
    '',
    markdownTable(costTable(samples)),
    '',
  );
  for (const id of metricIds) {
    const s = samples[id];
    if (!s || id === 'no-failures') continue;
    lines.push(
      `- ${metrics[id].label} — requeue sent per job: ${describeSent(s.requeue)}; ` +
        `BullMQ: ${describeSent(s.bullmq)}`,
    );
  }
  return lines.join('\n');
}
