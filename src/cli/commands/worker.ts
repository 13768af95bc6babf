import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Command } from 'commander';
import { createLogger } from '../../config/logger.js';
import { parseBreakerOptions } from '../../policy/breaker/breaker-options.js';
import { parseBudgetOptions } from '../../policy/budget/budget-options.js';
import { parseRetryPolicy } from '../../policy/retry-policy.js';
import { createWorker, type Handler } from '../../scheduler/worker.js';
import { waitForSignal } from '../../util/signals.js';
import { CliUsageError, parseJsonFlag, parseNumberFlag } from '../cli-error.js';
import { redisUrlFrom, withRedisOption } from '../connection-flag.js';

/** `requeue worker <queue> --handler <module> [--concurrency N] [--policy JSON]` */
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
      .option('--shutdown-timeout-ms <ms>', 'on SIGTERM, wait this long for active jobs', '30000')
      .option(
        '--lock-duration-ms <ms>',
        'a job whose worker is silent this long is recovered',
        '30000',
      ),
  ).action(async (queue: string, opts) => {
    const concurrency = parseNumberFlag('--concurrency', opts.concurrency, {
      integer: true,
      min: 1,
    });
    const shutdownTimeoutMs = parseNumberFlag('--shutdown-timeout-ms', opts.shutdownTimeoutMs, {
      min: 0,
    });
    const lockDurationMs = parseNumberFlag('--lock-duration-ms', opts.lockDurationMs, {
      integer: true,
      min: 100,
    });
    const policy =
      opts.policy === undefined
        ? undefined
        : parseRetryPolicy(parseJsonFlag('--policy', opts.policy), '--policy');
    const breaker =
      opts.breaker === undefined ? undefined : parseJsonFlag('--breaker', opts.breaker);
    const budget = opts.budget === undefined ? undefined : parseJsonFlag('--budget', opts.budget);
    const handler = await loadHandler(opts.handler);
    const logger = createLogger();
    const worker = createWorker(queue, handler, {
      connection: redisUrlFrom(opts),
      concurrency,
      lockDurationMs,
      stalledIntervalMs: Math.max(100, Math.round(lockDurationMs / 2)),
      logger,
      ...(policy !== undefined ? { policy } : {}),
      ...(breaker !== undefined ? { breaker: parseBreakerOptions(breaker, '--breaker') } : {}),
      ...(budget !== undefined ? { budget: parseBudgetOptions(budget, '--budget') } : {}),
    });
    await worker.waitUntilReady();
    logger.info({ queue, concurrency, policy: worker.policy }, 'worker started');
    await waitForSignal();
    logger.info({ shutdownTimeoutMs }, 'draining');
    await worker.close({ timeoutMs: shutdownTimeoutMs });
    logger.info('stopped');
  });
}

/** Imports a handler module and returns its default export. */
export async function loadHandler(path: string): Promise<Handler<unknown, unknown>> {
  let mod: { default?: unknown };
  try {
    mod = (await import(pathToFileURL(resolve(path)).href)) as { default?: unknown };
  } catch (err) {
    throw new CliUsageError(`--handler: cannot load ${path} (${(err as Error).message})`);
  }
  if (typeof mod.default !== 'function') {
    throw new CliUsageError(`--handler: ${path} has no default export function`);
  }
  return mod.default as Handler<unknown, unknown>;
}
