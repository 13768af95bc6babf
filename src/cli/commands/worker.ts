import { Option, type Command } from 'commander';
import { createLogger } from '../../config/logger.js';
import { parseBreakerOptions } from '../../policy/breaker/breaker-options.js';
import { parseBudgetOptions } from '../../policy/budget/budget-options.js';
import { limits } from '../../policy/limits.js';
import { parseRetryPolicy } from '../../policy/retry-policy.js';
import { checkRedis } from '../../redis/check-redis.js';
import { defaultMetricsHost, serveMetrics } from '../../scheduler/metrics-server.js';
import { createWorker, type Handler } from '../../scheduler/requeue-worker.js';
import type { RetryOrder } from '../../scheduler/worker-options.js';
import { loadHandlerModule } from '../../util/load-module.js';
import { closeOnSignal } from '../../util/signals.js';
import { CliUsageError, parseJsonFlag, parseNumberFlag } from '../cli-error.js';
import {
  connectTimeoutFrom,
  redisLabel,
  redisUrlFrom,
  withRedisOption,
} from '../connection-flag.js';

/** `requeue worker <queue> --handler <module> [--concurrency N] [--policy JSON] [--retry-order first|fifo]` */
export function registerWorker(program: Command): void {
  withRedisOption(
    program
      .command('worker')
      .description('Process a queue with a handler module, with requeue retries and DLQ')
      .argument('<queue>', 'queue name')
      .requiredOption(
        '--handler <module>',
        'a module whose default export is async (job) => result',
      )
      .option('--concurrency <n>', 'jobs at once', '1')
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
      ),
  ).action(async (queue: string, opts) => {
    const concurrency = parseNumberFlag('--concurrency', opts.concurrency, {
      integer: true,
      min: 1,
      max: limits.concurrency,
    });
    const shutdownTimeoutMs = parseNumberFlag('--shutdown-timeout-ms', opts.shutdownTimeoutMs, {
      min: 0,
      max: limits.timeoutMs,
    });
    const lockDurationMs = parseNumberFlag('--lock-duration-ms', opts.lockDurationMs, {
      integer: true,
      min: 100,
      max: limits.timeoutMs,
    });
    const retryShare = parseNumberFlag('--retry-share', opts.retryShare, { min: 0, max: 1 });
    if (retryShare === 0) throw new CliUsageError('--retry-share: must be more than 0, got 0');
    const metricsPort =
      opts.metricsPort === undefined || opts.metricsPort === ''
        ? undefined
        : parseNumberFlag('--metrics-port', opts.metricsPort, {
            integer: true,
            min: 0,
            max: 65_535,
          });
    const policy =
      opts.policy === undefined
        ? undefined
        : parseRetryPolicy(parseJsonFlag('--policy', opts.policy), '--policy');
    const breaker =
      opts.breaker === undefined
        ? undefined
        : parseBreakerOptions(parseJsonFlag('--breaker', opts.breaker), '--breaker');
    const budget =
      opts.budget === undefined
        ? undefined
        : parseBudgetOptions(parseJsonFlag('--budget', opts.budget), '--budget');
    const { handler } = await loadHandlerModule<Handler<unknown, unknown>>(
      opts.handler,
      '--handler',
    );
    const logger = createLogger();
    const url = redisUrlFrom(opts);
    // A Redis that refuses the password (or is not there) is one line, not a worker retrying for ever.
    await checkRedis(url, redisLabel(opts), connectTimeoutFrom(opts));
    const metrics =
      metricsPort === undefined
        ? undefined
        : await serveMetrics({
            connection: url,
            port: metricsPort,
            host: opts.metricsHost,
            label: '--metrics-port',
            logger,
          });
    const worker = createWorker(queue, handler, {
      connection: url,
      concurrency,
      lockDurationMs,
      stalledIntervalMs: Math.max(100, Math.round(lockDurationMs / 2)),
      retryOrder: opts.retryOrder as RetryOrder,
      retryShare,
      logger,
      ...(policy !== undefined ? { policy } : {}),
      ...(breaker !== undefined ? { breaker } : {}),
      ...(budget !== undefined ? { budget } : {}),
    });
    metrics?.watch(worker);
    await worker.waitUntilReady();
    logger.info({ queue, concurrency, policy: worker.policy }, 'worker started');
    await closeOnSignal({
      timeoutMs: shutdownTimeoutMs,
      close: (budget) =>
        Promise.all([
          worker.close({ timeoutMs: budget.left() }),
          metrics?.close(Math.min(budget.left(), 5_000)),
        ]),
      logger,
    });
  });
}
