import { Option, type Command } from 'commander';
import type { BreakerOptions } from '../policy/breaker/breaker-options.js';
import { parseBreakerOptions } from '../policy/breaker/breaker-options.js';
import type { BudgetOptions } from '../policy/budget/budget-options.js';
import { parseBudgetOptions } from '../policy/budget/budget-options.js';
import { limits } from '../policy/limits.js';
import { parseRetryPolicy, type RetryPolicy } from '../policy/retry-policy.js';
import { defaultMetricsHost } from '../scheduler/metrics-server.js';
import type { RetryOrder } from '../scheduler/worker-options.js';
import { CliUsageError, parseJsonFlag, parseNumberFlag } from './cli-error.js';

/**
 * The flags every command that runs handlers shares (`requeue worker`,
 * `requeue consume amqp|nats`): concurrency, policy, breaker, budget, retry
 * order and share, shutdown and lock timeouts, metrics.
 */
export function withWorkerFlags(command: Command, concurrencyHelp = 'jobs at once'): Command {
  return command
    .option('--concurrency <n>', concurrencyHelp, '1')
    .option('--policy <json>', 'retry policy for jobs that bring none, as JSON')
    .option(
      '--breaker <json>',
      'circuit breaker shared by the workers, e.g. {"failureRate":0.5,"openMs":3000}',
    )
    .option('--budget <json>', 'retry budget, e.g. {"kind":"token-bucket","capacity":500}')
    .addOption(
      new Option(
        '--retry-order <order>',
        'due retries ahead of waiting new work (first) or behind it (fifo)',
      )
        .choices(['first', 'fifo'])
        .default('first'),
    )
    .option(
      '--retry-share <x>',
      'with --retry-order first: the most of the jobs taken that may be retries moved ahead, in (0, 1]',
      '0.5',
    )
    .option(
      '--shutdown-timeout-ms <ms>',
      'on SIGTERM, wait this long for active jobs, then exit and leave them to stalled recovery',
      '30000',
    )
    .option(
      '--lock-duration-ms <ms>',
      'a job whose worker is silent this long is recovered',
      '30000',
    )
    .addOption(
      new Option(
        '--metrics-port <port>',
        'serve Prometheus metrics at http://<host>:<port>/metrics (0: any free port)',
      ).env('METRICS_PORT'),
    )
    .addOption(
      new Option('--metrics-host <host>', 'the interface --metrics-port listens on')
        .env('METRICS_HOST')
        .default(defaultMetricsHost),
    );
}

/** The values of {@link withWorkerFlags}'s flags, checked, each error naming its flag. */
export interface WorkerFlags {
  concurrency: number;
  shutdownTimeoutMs: number;
  lockDurationMs: number;
  retryShare: number;
  retryOrder: RetryOrder;
  metricsPort: number | undefined;
  metricsHost: string;
  policy: RetryPolicy | undefined;
  breaker: BreakerOptions | undefined;
  budget: BudgetOptions | undefined;
}

/** Parses {@link withWorkerFlags}'s flags; throws a {@link CliUsageError} or `ConfigError` naming the flag. */
export function parseWorkerFlags(opts: Record<string, string | undefined>): WorkerFlags {
  const concurrency = parseNumberFlag('--concurrency', opts.concurrency ?? '1', {
    integer: true,
    min: 1,
    max: limits.concurrency,
  });
  const shutdownTimeoutMs = parseNumberFlag(
    '--shutdown-timeout-ms',
    opts.shutdownTimeoutMs ?? '30000',
    { min: 0, max: limits.timeoutMs },
  );
  const lockDurationMs = parseNumberFlag('--lock-duration-ms', opts.lockDurationMs ?? '30000', {
    integer: true,
    min: 100,
    max: limits.timeoutMs,
  });
  const retryShare = parseNumberFlag('--retry-share', opts.retryShare ?? '0.5', {
    min: 0,
    max: 1,
  });
  if (retryShare === 0) throw new CliUsageError('--retry-share: must be more than 0, got 0');
  const metricsPort =
    opts.metricsPort === undefined || opts.metricsPort === ''
      ? undefined
      : parseNumberFlag('--metrics-port', opts.metricsPort, {
          integer: true,
          min: 0,
          max: 65_535,
        });
  return {
    concurrency,
    shutdownTimeoutMs,
    lockDurationMs,
    retryShare,
    retryOrder: (opts.retryOrder ?? 'first') as RetryOrder,
    metricsPort,
    metricsHost: opts.metricsHost ?? defaultMetricsHost,
    policy:
      opts.policy === undefined
        ? undefined
        : parseRetryPolicy(parseJsonFlag('--policy', opts.policy), '--policy'),
    breaker:
      opts.breaker === undefined
        ? undefined
        : parseBreakerOptions(parseJsonFlag('--breaker', opts.breaker), '--breaker'),
    budget:
      opts.budget === undefined
        ? undefined
        : parseBudgetOptions(parseJsonFlag('--budget', opts.budget), '--budget'),
  };
}

/** The requeue-worker options the flags set (for a `createWorker` call). */
export function workerOptionsFrom(flags: WorkerFlags) {
  return {
    concurrency: flags.concurrency,
    lockDurationMs: flags.lockDurationMs,
    stalledIntervalMs: Math.max(100, Math.round(flags.lockDurationMs / 2)),
    retryOrder: flags.retryOrder,
    retryShare: flags.retryShare,
    ...(flags.policy !== undefined ? { policy: flags.policy } : {}),
    ...(flags.breaker !== undefined ? { breaker: flags.breaker } : {}),
    ...(flags.budget !== undefined ? { budget: flags.budget } : {}),
  };
}
