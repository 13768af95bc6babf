/**
 * requeue's public API. Internal modules stay unexported on purpose.
 *
 * @module requeue
 */

// Producer, worker, dead-letter queue.
export { createQueue, RequeueQueue } from './scheduler/queue.js';
export type { QueueOptions, AddOptions, AddedJob, QueueCounts } from './scheduler/queue.js';
export { createWorker, RequeueWorker, queueBreakerKey } from './scheduler/requeue-worker.js';
export type { Handler, RequeueJob, WorkerOptions } from './scheduler/requeue-worker.js';
export { DeadLetterQueue } from './scheduler/dlq/dead-letter-queue.js';
export type { DeadPage } from './scheduler/dlq/dead-index.js';
export type { RetryOrder } from './scheduler/worker-options.js';
export type { ClockStatus } from './scheduler/clock-watch.js';
export type {
  DeadJobRecord,
  DeadJobFilter,
  DeadLetterOptions,
  Retention,
  BulkOptions,
  BulkProgress,
  ReplayResult,
  ReplayOptions,
  ReplayLane,
  RetentionResult,
} from './scheduler/dlq/dead-letter-queue.js';
export { retryJobNow } from './scheduler/retry-now.js';
export type { RetryNowOptions, RetryNowOutcome, RetryNowResult } from './scheduler/retry-now.js';
export type { WorkerEvents } from './scheduler/events.js';
export type { AttemptRecord, JobState } from './policy/job-state.js';
export { RequeueMetrics, type RequeueMetricsOptions } from './scheduler/metrics.js';

// Connections: one Redis or a Redis Cluster; BullMQ's key prefix of a queue
// (for tools that open the queue themselves, such as bull-board).
export { createCluster, clusterFromEnv } from './redis/connection.js';
export type { RedisClient, RedisLike } from './redis/connection.js';
export { bullPrefix } from './redis/keys.js';

// Pure policy: strategies, retry policy, classification, decisions.
export { computeDelay, strategyNames } from './policy/backoff/index.js';
export type {
  BackoffInput,
  BackoffOptions,
  BackoffPolicy,
  StrategyName,
} from './policy/backoff/index.js';
export {
  retryPolicySchema,
  defaultRetryPolicy,
  parseRetryPolicy,
  planNextAttempt,
} from './policy/retry-policy.js';
export type {
  RetryPolicy,
  RetryPolicyInput,
  AttemptContext,
  RetryDecision,
} from './policy/retry-policy.js';
export { simulatePlan } from './policy/plan.js';
export type { PlanResult, PlanOptions, RetryStats } from './policy/plan.js';
export {
  classifyError,
  classifyOptionsSchema,
  defaultClassifyOptions,
  parseClassifyOptions,
  parseRetryAfter,
  describeError,
} from './policy/classify/index.js';
export type {
  Classification,
  ClassifyOptions,
  ClassifyOptionsInput,
  ErrorDescription,
  PermanentClassification,
  PermanentReason,
  RetryClassification,
  RetryPredicate,
  RetryReason,
} from './policy/classify/index.js';
export { decideFailure } from './policy/decide.js';
export type { FailureContext, FailureDecision } from './policy/decide.js';
export { deadReasons } from './errors/dead-reason.js';
export type { DeadReason } from './errors/dead-reason.js';
export { breakerOptionsSchema, parseBreakerOptions } from './policy/breaker/breaker-options.js';
export type { BreakerOptions, BreakerOptionsInput } from './policy/breaker/breaker-options.js';
export type { BreakerState, BreakerPhase, Admission } from './policy/breaker/breaker.js';
export { budgetOptionsSchema, parseBudgetOptions } from './policy/budget/budget-options.js';
export type { BudgetOptions, BudgetOptionsInput } from './policy/budget/budget-options.js';
export {
  adaptiveConcurrencySchema,
  parseAdaptiveConcurrency,
} from './policy/limit/limit-options.js';
export type {
  AdaptiveConcurrency,
  AdaptiveConcurrencyInput,
} from './policy/limit/limit-options.js';
export { nextLimit, initialLimitState } from './policy/limit/aimd.js';
export type { Bounds, LimitSignal, LimitState, LimitSample } from './policy/limit/aimd.js';
export { concurrencyLimitSchema, parseConcurrencyLimit } from './policy/limit/gradient-options.js';
export type {
  ConcurrencyLimitOptions,
  ConcurrencyLimitInput,
} from './policy/limit/gradient-options.js';
export { LimitStore } from './redis/limit-store.js';
export type { Acquired, KeyLimitView, LimitParams } from './redis/limit-store.js';
export { BreakerStore } from './redis/breaker-store.js';
export type {
  BreakerMessage,
  BreakerStatus,
  BreakerStoreHooks,
  OutcomeBatch,
} from './redis/breaker-store.js';
export { BudgetStore } from './redis/budget-store.js';
export type { BudgetStatus, BudgetStoreHooks } from './redis/budget-store.js';

// Errors.
export { PermanentError, isPermanentError } from './errors/permanent-error.js';
export { RetryableError, isRetryableError } from './errors/retryable-error.js';
export type { RetryableErrorOptions } from './errors/retryable-error.js';
export { ConfigError } from './errors/config-error.js';

// Clock, random, logging.
export { systemClock, systemRandom } from './util/system.js';
export type { Clock, Random } from './util/system.js';
export { seededRandom } from './util/random.js';
export { createLogger } from './config/logger.js';
export type { Logger, LoggerOption } from './config/logger.js';
export type { RateLimit } from './redis/rate-store.js';
