import { parseBreakerOptions } from '../policy/breaker/breaker-options.js';
import { parseBudgetOptions } from '../policy/budget/budget-options.js';
import { parseClassifyOptions } from '../policy/classify/index.js';
import { parseAdaptiveConcurrency } from '../policy/limit/limit-options.js';
import { parseConcurrencyLimit } from '../policy/limit/gradient-options.js';
import { parseBullPrefix, parseQueueName } from '../policy/queue-name.js';
import { parseRetryPolicy } from '../policy/retry-policy.js';
import { parseConfig } from '../util/parse-config.js';
import { retryOrderSchema, workerNumbersSchema, type WorkerOptions } from './worker-options.js';

/**
 * Every option of a worker checked at once, before a connection is opened:
 * the first bad one throws a `ConfigError` naming its field (`worker.…`).
 */
export function parseWorkerOptions<T>(name: string, options: WorkerOptions<T>) {
  parseQueueName(name, 'worker');
  if (options.prefix !== undefined) parseBullPrefix(options.prefix, 'worker.prefix');
  parseConfig(
    workerNumbersSchema,
    {
      concurrency: options.concurrency,
      attemptTimeoutMs: options.attemptTimeoutMs,
      lockDurationMs: options.lockDurationMs,
      stalledIntervalMs: options.stalledIntervalMs,
      keyConcurrency:
        typeof options.keyConcurrency === 'number' ? options.keyConcurrency : undefined,
      maxClockSkewMs: options.maxClockSkewMs,
      clockCheckIntervalMs: options.clockCheckIntervalMs,
    },
    'worker',
  );
  const order = parseConfig(
    retryOrderSchema,
    { retryOrder: options.retryOrder, retryShare: options.retryShare },
    'worker',
  );
  const adaptive = options.adaptiveConcurrency
    ? parseAdaptiveConcurrency(options.adaptiveConcurrency, 'worker.adaptiveConcurrency')
    : undefined;
  // On by default only without a key: with one, a slow key must not lower every key's share
  // (its bulkhead and `adaptiveConcurrency` act per key); given explicitly, it is on.
  const limitInput = options.concurrencyLimit ?? (options.breakerKey ? false : {});
  const concurrencyLimit =
    limitInput === false ? undefined : parseConcurrencyLimit(limitInput, 'worker.concurrencyLimit');
  return {
    order,
    adaptive,
    concurrencyLimit,
    policy: parseRetryPolicy(options.policy ?? {}, 'worker.policy'),
    classify: parseClassifyOptions(options.classify ?? {}),
    breaker: options.breaker ? parseBreakerOptions(options.breaker, 'worker.breaker') : undefined,
    budget: options.budget ? parseBudgetOptions(options.budget, 'worker.budget') : undefined,
  };
}
