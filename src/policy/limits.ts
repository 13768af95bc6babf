/**
 * Upper bounds of every number requeue accepts, in one place. Each is far
 * above any sane setting and low enough that a typo (`1000000` attempts, a
 * delay in microseconds) is refused with a message that says the bound,
 * instead of running for ever or overflowing a timer.
 */
export const limits = Object.freeze({
  /** Any one delay: base, cap, a job's start delay, a server's `Retry-After`. 30 days. */
  delayMs: 30 * 86_400_000,
  /** A retry window (`maxElapsedMs`). 365 days. */
  elapsedMs: 365 * 86_400_000,
  /** Attempts of one job, the first included. */
  attempts: 1_000,
  /** Growth per retry. */
  factor: 100,
  /** Jobs at once in one worker. */
  concurrency: 1_000,
  /** A shutdown, lock, attempt or delivery timeout. 1 hour. */
  timeoutMs: 3_600_000,
  /** Token-bucket capacity and costs, ratio-budget minimums. */
  budgetTokens: 1_000_000,
  /** A window (budget, breaker) length. 1 day. */
  windowMs: 86_400_000,
  /** Samples `requeue plan` draws, all retries counted (samples × retries): about 9 s of CPU. */
  planDelays: 20_000_000,
  /** Characters of a queue name. */
  queueName: 200,
  /** Characters of a job name. */
  jobName: 200,
  /** Characters of an idempotency key (it becomes the job id, part of Redis keys). */
  idempotencyKey: 512,
  /** Characters of a dispatch key (a tenant, an endpoint id): it is a member of a Redis set. */
  dispatchKey: 200,
  /** A dispatch key's weight, and 1 over its smallest: a key gets weight / Σ weights of the turns. */
  dispatchWeight: 1_000,
  /** Entries of a queue's `dispatchWeights` map. */
  dispatchWeights: 10_000,
  /** Characters of a bearer token. */
  token: 1_024,
  /** Bytes of an intake request body. 64 MiB. */
  bodyBytes: 64 * 1024 * 1024,
  /** Nesting depth of an intake request body. */
  bodyDepth: 64,
  /** Items in a DLQ listing page. */
  listLimit: 10_000,
  /** Dead jobs kept per queue by retention. */
  retentionCount: 10_000_000,
  /** Queues one `requeue doctor` checks (`--queue`, repeated), five round trips each. */
  doctorQueues: 1_000,
});
