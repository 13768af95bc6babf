import type { MetricId, Target } from './scenarios.js';
import {
  rate,
  summarise,
  describeTarget,
  medianCost,
  sentPerRun,
  executedPerRun,
  type SideKey,
  type Sample,
  type RunReport,
} from './report.js';

/**
 * The scheduler bench's results as `npm run bench -- --json` prints them: the
 * rows the tables are made of, rounded, with each side's cost per job.
 */

/** A row as `--json` prints it. */
export interface JsonRow {
  id: MetricId;
  label: string;
  /** What the BullMQ column measures. */
  reference: string;
  /** Median jobs/s of each side. */
  requeue: number;
  bullmq: number;
  /** The median of the per-repeat ratios requeue/BullMQ. */
  ratio: number;
  /** `ratio ≥ 0.80`, or `— (reference)`. */
  target: string;
  /** The target as data: `{ kind: 'ratio', min: 0.8 }`, or `{ kind: 'reference' }`. */
  targetSpec: Target;
  /** true or false; null for a reference row. */
  met: boolean | null;
  /** Every run, in run order: jobs/s of each side and the per-repeat ratios. */
  runs: { requeue: number[]; bullmq: number[]; ratios: number[] };
  /** Per job, median over the runs: commands sent and executed, CPU µs of Node and Redis. */
  costPerJob: Record<SideKey, CostPerJob> | null;
}

export interface CostPerJob {
  sent: number;
  executed: number;
  nodeCpuUs: number;
  redisCpuUs: number;
}

/** The results as `npm run bench -- --json` prints them: the rows the tables are made of. */
export function renderJson(input: RunReport): string {
  const { machine, options, samples } = input;
  const rows: JsonRow[] = summarise(samples).map((r) => {
    const s = samples[r.id]!;
    return {
      id: r.id,
      label: r.label,
      reference: r.reference,
      requeue: round(r.requeue, 1),
      bullmq: round(r.bullmq, 1),
      ratio: round(r.ratio, 3),
      target: describeTarget(r.target),
      targetSpec: r.target,
      met: r.met ?? null,
      runs: {
        requeue: s.requeue.map((x) => round(rate(x), 1)),
        bullmq: s.bullmq.map((x) => round(rate(x), 1)),
        ratios: r.ratios.map((x) => round(x, 3)),
      },
      costPerJob: s.requeue.some((x) => x.cost)
        ? { requeue: costPerJob(s.requeue), bullmq: costPerJob(s.bullmq) }
        : null,
    };
  });
  return `${JSON.stringify(
    {
      bench: 'scheduler',
      date: input.startedAt.toISOString(),
      durationS: round(input.durationS, 1),
      command: input.command,
      revision: input.revision,
      machine: { ...machine, loadAverageAfter: round(input.loadAfter, 2) },
      redis: input.redisSource,
      options: {
        jobs: options.jobs,
        retryJobs: options.retryJobs,
        dlqJobs: options.dlqJobs,
        concurrency: options.concurrency,
        repeats: options.repeats,
        scenarios: options.scenarios,
      },
      rows,
      allMet: rows.every((r) => r.met !== false),
    },
    null,
    2,
  )}\n`;
}

function costPerJob(samples: Sample[]): CostPerJob {
  return {
    sent: round(medianCost(samples, sentPerRun), 3),
    executed: round(medianCost(samples, executedPerRun), 2),
    nodeCpuUs: round(
      medianCost(samples, (c) => c.nodeCpuUs),
      1,
    ),
    redisCpuUs: round(
      medianCost(samples, (c) => c.redisCpuUs),
      1,
    ),
  };
}

function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Number.isFinite(value) ? Math.round(value * f) / f : value;
}
