#!/usr/bin/env node
import { ConfigError } from '../../src/config/env.js';
import { createLogger } from '../../src/config/logger.js';
import { closeOnSignal } from '../../src/util/signals.js';
import { loadServiceConfig } from './config.js';
import { startService } from './service.js';

/**
 * `npm start`: the requeue service. Configuration comes from the file named by
 * `REQUEUE_CONFIG` and the environment; SIGTERM and SIGINT drain it, and it
 * exits within `shutdownTimeoutMs` (plus a moment) whatever handlers or Redis do.
 */
async function main(): Promise<number> {
  const logger = createLogger();
  let config;
  let service;
  try {
    config = await loadServiceConfig();
    service = await startService(config, logger);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`requeue: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  await closeOnSignal({ timeoutMs: config.shutdownTimeoutMs, close: service.stop, logger });
  return 0;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`requeue: ${(err as Error)?.stack ?? String(err)}\n`);
    process.exitCode = 1;
  },
);
