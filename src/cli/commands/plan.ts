import type { Command } from 'commander';
import type { z } from 'zod';
import { strategyNames, type StrategyName } from '../../policy/backoff/index.js';
import { simulatePlan, type PlanResult, type RetryStats } from '../../policy/plan.js';
import {
  defaultRetryPolicy,
  retryPolicySchema,
  type RetryPolicy,
} from '../../policy/retry-policy.js';
import { policyPresets } from '../../policy/webhook-policy.js';
import { seededRandom } from '../../util/random.js';
import { limits } from '../../policy/limits.js';
import { CliUsageError, parseNumberFlag } from '../cli-error.js';
import { formatTable } from '../table.js';

interface PlanFlags {
  preset?: string;
  strategy?: string;
  baseMs?: string;
  capMs?: string;
  factor?: string;
  jitter?: string;
  randomMs?: string;
  maxAttempts?: string;
  maxElapsedMs?: string;
  samples: string;
  seed: string;
  json?: boolean;
}

const numericFields = [
  'baseMs',
  'capMs',
  'factor',
  'jitter',
  'randomMs',
  'maxAttempts',
  'maxElapsedMs',
] as const;

/** Strategy by strategy, the options that change its delays (for the summary line). */
const optionsRead: Record<StrategyName, readonly (keyof RetryPolicy)[]> = {
  fixed: ['baseMs'],
  linear: ['baseMs', 'capMs'],
  exponential: ['baseMs', 'capMs', 'factor'],
  'full-jitter': ['baseMs', 'capMs', 'factor'],
  'equal-jitter': ['baseMs', 'capMs', 'factor'],
  'decorrelated-jitter': ['baseMs', 'capMs'],
  google: ['baseMs', 'capMs', 'randomMs'],
  'normal-jitter': ['baseMs', 'capMs', 'factor', 'jitter'],
  schedule: ['scheduleMs', 'jitter'],
};

const maxSamples = 10_000_000;

/**
 * Registers `requeue plan`: simulates a retry policy and prints, retry by
 * retry, the distribution of delays and of time since the first failure.
 * Flags left out take the policy's defaults.
 */
export function registerPlan(program: Command): void {
  const d = defaultRetryPolicy;
  program
    .command('plan')
    .description('Simulate a retry policy: delay and elapsed-time percentiles per retry')
    .option(
      '--preset <name>',
      `start from a named policy (${Object.keys(policyPresets).join(', ')}); other flags change it`,
    )
    .option(
      '--strategy <name>',
      `backoff strategy: ${strategyNames.join(', ')} (default ${d.strategy})`,
    )
    .option('--base-ms <ms>', `first delay in milliseconds (default ${d.baseMs})`)
    .option('--cap-ms <ms>', `longest delay in milliseconds (default ${d.capMs})`)
    .option('--max-attempts <n>', `attempts in all, the first included (default ${d.maxAttempts})`)
    .option('--factor <f>', `growth per retry (default ${d.factor})`)
    .option(
      '--jitter <j>',
      `normal-jitter deviation as a fraction of the delay (default ${d.jitter})`,
    )
    .option('--random-ms <ms>', `google: width of the random term (default ${d.randomMs})`)
    .option(
      '--max-elapsed-ms <ms>',
      'give up once a retry would start this long after the first failure',
    )
    .option('--samples <n>', 'simulated jobs', '100000')
    .option('--seed <n>', 'random seed', '7')
    .option('--json', 'print one JSON object, in milliseconds')
    .action((flags: PlanFlags) => {
      const policy = policyFromFlags(flags);
      const samples = parseNumberFlag('--samples', flags.samples, { integer: true, min: 1 });
      if (samples > maxSamples)
        throw new CliUsageError(`--samples: must be ≤ ${maxSamples}, got ${flags.samples}`);
      const delays = samples * (policy.maxAttempts - 1);
      if (delays > limits.planDelays)
        throw new CliUsageError(
          `--samples × retries: at most ${limits.planDelays} delays, got ${samples} × ${policy.maxAttempts - 1}; lower --samples or --max-attempts`,
        );
      const seed = parseNumberFlag('--seed', flags.seed, { integer: true });
      const plan = simulatePlan(policy, { samples, random: seededRandom(seed) });
      process.stdout.write(flags.json ? formatJson(plan) : formatPlan(plan, samples, seed));
    });
}

/** Flag name of a policy field: `capMs` → `--cap-ms`. */
export function flagOf(field: string): string {
  return `--${field.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
}

/**
 * Builds the policy from the flags given and validates it with the policy's
 * own schema, so errors name the flag and the field: `--cap-ms (capMs): …`.
 */
function policyFromFlags(flags: PlanFlags): RetryPolicy {
  const input: Record<string, unknown> = {};
  if (flags.preset !== undefined) {
    const preset = policyPresets[flags.preset as keyof typeof policyPresets];
    if (!Object.hasOwn(policyPresets, flags.preset) || preset === undefined)
      throw new CliUsageError(
        `--preset: must be one of ${Object.keys(policyPresets).join(', ')}, got "${flags.preset}"`,
      );
    Object.assign(input, preset, { scheduleMs: [...(preset.scheduleMs ?? [])] });
  }
  if (flags.strategy !== undefined) input.strategy = flags.strategy;
  for (const field of numericFields) {
    const value = flags[field];
    if (value !== undefined) input[field] = parseNumberFlag(flagOf(field), value);
  }
  const result = retryPolicySchema.safeParse(input);
  if (!result.success) throw new CliUsageError(describeIssues(result.error));
  return result.data;
}

/** One clause per zod issue, naming the flag and the policy field. */
export function describeIssues(error: z.ZodError): string {
  return error.issues
    .map((issue) => {
      const field = String(issue.path[0] ?? 'policy');
      return `${flagOf(field)} (${field}): ${issue.message}`;
    })
    .join('; ');
}

const round3 = (ms: number): number => Math.round(ms * 1000) / 1000;

function formatJson({ policy, retries }: PlanResult): string {
  const rounded = retries.map((r) => ({
    retry: r.retry,
    min: round3(r.min),
    p50: round3(r.p50),
    p90: round3(r.p90),
    p99: round3(r.p99),
    max: round3(r.max),
    mean: round3(r.mean),
    cumulative: {
      p50: round3(r.cumulative.p50),
      p99: round3(r.cumulative.p99),
      mean: round3(r.cumulative.mean),
    },
    ...(r.gaveUp === undefined ? {} : { gaveUp: round3(r.gaveUp) }),
  }));
  return `${JSON.stringify({ policy, retries: rounded }, null, 2)}\n`;
}

/** A duration for people: `850ms`, `1.2s`, `4.5m`, `2.0h`. */
export function formatMs(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  if (ms < 3_600_000) return `${(ms / 60_000).toFixed(1)}m`;
  return `${(ms / 3_600_000).toFixed(1)}h`;
}

function formatPlan({ policy, retries }: PlanResult, samples: number, seed: number): string {
  const params = optionsRead[policy.strategy].map((key) => `${key}=${policy[key]}`);
  params.push(`maxAttempts=${policy.maxAttempts}`);
  if (policy.maxElapsedMs !== undefined) params.push(`maxElapsedMs=${policy.maxElapsedMs}`);
  const summary =
    `${policy.strategy} ${params.join(' ')}` +
    ` (${retries.length} retries; ${samples} samples, seed ${seed}; retry 0 follows the first failure)`;

  const withGaveUp = policy.maxElapsedMs !== undefined;
  const header = [
    'retry',
    'min',
    'p50',
    'p90',
    'p99',
    'max',
    'mean',
    'cum p50',
    'cum p99',
    'cum mean',
  ];
  if (withGaveUp) header.push('gave up');
  const rows = retries.map((r: RetryStats) => {
    const row = [String(r.retry), ...[r.min, r.p50, r.p90, r.p99, r.max, r.mean].map(formatMs)];
    row.push(...[r.cumulative.p50, r.cumulative.p99, r.cumulative.mean].map(formatMs));
    if (withGaveUp) row.push(`${((r.gaveUp ?? 0) * 100).toFixed(1)}%`);
    return row;
  });
  return `${summary}\n${formatTable(header, rows, { align: header.map(() => 'right') })}`;
}
