import type { Command } from 'commander';
import { createLogger } from '../../config/logger.js';
import { checkRedis } from '../../redis/check-redis.js';
import { serveMetrics } from '../../scheduler/metrics-server.js';
import { createWorker, type Handler } from '../../scheduler/requeue-worker.js';
import { loadHandlerModule } from '../../util/load-module.js';
import { closeOnSignal } from '../../util/signals.js';
import { parseWorkerFlags, withWorkerFlags, workerOptionsFrom } from '../worker-flags.js';
import {
  connectTimeoutFrom,
  redisLabel,
  redisUrlFrom,
  withRedisOption,
} from '../connection-flag.js';

/** `requeue worker <queue> --handler <module> [--concurrency N] [--policy JSON] [--retry-order first|fifo]` */
export function registerWorker(program: Command): void {
  withRedisOption(
    withWorkerFlags(
      program
        .command('worker')
        .description('Process a queue with a handler module, with requeue retries and DLQ')
        .argument('<queue>', 'queue name')
        .requiredOption(
          '--handler <module>',
          'a module whose default export is async (job) => result',
        ),
    ),
  ).action(async (queue: string, opts) => {
    const flags = parseWorkerFlags(opts);
    const { handler } = await loadHandlerModule<Handler<unknown, unknown>>(
      opts.handler,
      '--handler',
    );
    const logger = createLogger();
    const url = redisUrlFrom(opts);
    // A Redis that refuses the password (or is not there) is one line, not a worker retrying for ever.
    await checkRedis(url, redisLabel(opts), connectTimeoutFrom(opts));
    const metrics =
      flags.metricsPort === undefined
        ? undefined
        : await serveMetrics({
            connection: url,
            port: flags.metricsPort,
            host: flags.metricsHost,
            label: '--metrics-port',
            logger,
          });
    const worker = createWorker(queue, handler, {
      connection: url,
      logger,
      ...workerOptionsFrom(flags),
    });
    metrics?.watch(worker);
    await worker.waitUntilReady();
    logger.info({ queue, concurrency: flags.concurrency, policy: worker.policy }, 'worker started');
    await closeOnSignal({
      timeoutMs: flags.shutdownTimeoutMs,
      close: (budget) =>
        Promise.all([
          worker.close({ timeoutMs: budget.left() }),
          metrics?.close(Math.min(budget.left(), 5_000)),
        ]),
      logger,
    });
  });
}
