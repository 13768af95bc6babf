#!/usr/bin/env node
import { createLogger } from '../../src/config/logger.js';
import { reportStartFailure } from '../../src/config/start-failure.js';
import { requireOptional, servicePackages } from '../../src/util/optional-deps.js';
import { closeOnSignal } from '../../src/util/signals.js';
import { loadServiceConfig } from './config.js';

/**
 * `npm start`: the requeue service. Configuration comes from the file named by
 * `REQUEUE_CONFIG` and the environment; SIGTERM and SIGINT drain it, and it
 * exits within `shutdownTimeoutMs` (plus a moment) whatever handlers or Redis do.
 * A bad start (config, environment, handler module, Redis refusing the
 * password, a host or port it cannot listen on) exits with one line naming the
 * setting, code 2, after closing what it opened.
 */
async function main(): Promise<never> {
  // Fastify and the dashboard's packages are optional peers of the library:
  // checked before the service's modules (which import them) are loaded.
  requireOptional(servicePackages, 'the requeue service');
  const { startService } = await import('./service.js');
  const config = await loadServiceConfig();
  const logger = createLogger({ level: config.logLevel, redactHeaders: config.redactHeaders });
  const service = await startService(config, logger);
  return closeOnSignal({
    timeoutMs: config.shutdownTimeoutMs,
    close: (budget) => service.stop({ timeoutMs: budget.left() }),
    logger,
  });
}

main().catch((err: unknown) => reportStartFailure('requeue', err, 500));
