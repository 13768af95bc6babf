import type { JobsOptions } from 'bullmq';
import type { RetryPolicyInput } from '../../src/policy/retry-policy.js';

/** The scenarios, in the order they run. */
export const scenarioIds = ['no-failures', 'retry-1', 'retry-3', 'dead-letter'] as const;
export type ScenarioId = (typeof scenarioIds)[number];

/**
 * Jobs per replay script call (`DeadLetterQueue.replay`'s `batchSize`, whose
 * default is 500), and so jobs per `addBulk` call of BullMQ's replay reference.
 */
export const replayBatch = 500;

/** What each job's handler does in a scenario. */
export type Failures =
  /** The first `count` attempts throw a 503; the next one succeeds. */
  | { kind: 'transient'; count: number }
  /** Every attempt throws a 400 (requeue) or an UnrecoverableError (BullMQ). */
  | { kind: 'permanent' };

export const scenarioFailures: Record<ScenarioId, Failures> = {
  'no-failures': { kind: 'transient', count: 0 },
  'retry-1': { kind: 'transient', count: 1 },
  'retry-3': { kind: 'transient', count: 3 },
  'dead-letter': { kind: 'permanent' },
};

/**
 * One row of the results table. The dead-letter scenario yields three: the
 * deaths, the replay against BullMQ's `addBulk` of the same jobs, and the
 * same replay against BullMQ's `retryJobs` (a reference).
 */
export const metricIds = [
  'no-failures',
  'no-failures-same-jobs',
  'retry-1',
  'retry-3',
  'dead-letter',
  'replay',
  'replay-vs-retry-jobs',
] as const;
export type MetricId = (typeof metricIds)[number];

/** What a row must reach: a ratio requeue/BullMQ, an absolute requeue rate, or nothing. */
export type Target =
  { kind: 'ratio'; min: number } | { kind: 'rate'; min: number } | { kind: 'reference' };

export interface MetricSpec {
  label: string;
  /** What the BullMQ column measures. */
  reference: string;
  target: Target;
  /** The requeue column shows the runs of this row instead of runs of its own. */
  requeueFrom?: MetricId;
}

export const metrics: Record<MetricId, MetricSpec> = {
  'no-failures': {
    label: '1. no failures',
    reference:
      'a Worker on jobs with BullMQ’s own options (attempts 5, exponential backoff, the same ' +
      'retention) and its counter ids; nothing fails',
    target: { kind: 'ratio', min: 0.95 },
  },
  'no-failures-same-jobs': {
    label: '1b. no failures, BullMQ on requeue’s jobs (reference)',
    reference:
      `a Worker, as in 1, on jobs added as requeue's producer adds them (its stored options, ` +
      `a producer-side id from requeue's newJobId each), in the same run: the ratio is requeue's worker ` +
      `alone; 1's BullMQ jobs have BullMQ's counter ids`,
    target: { kind: 'reference' },
    requeueFrom: 'no-failures',
  },
  'retry-1': {
    label: '2. 1 transient failure (503) per job',
    reference: 'attempts 5, exponential backoff delay 1 jitter 1',
    target: { kind: 'ratio', min: 1.0 },
  },
  'retry-3': {
    label: '3. 3 transient failures (503) per job',
    reference: 'attempts 5, exponential backoff delay 1 jitter 1',
    target: { kind: 'ratio', min: 1.0 },
  },
  'dead-letter': {
    label: '4a. permanent failure (400) → DLQ',
    reference: 'the handler throws UnrecoverableError: BullMQ moves the job to its failed set',
    target: { kind: 'ratio', min: 0.8 },
  },
  replay: {
    label: '4b. DLQ replay',
    reference:
      `queue.addBulk of the same jobs into the same queue, in the same run: as many, ` +
      `data { i }, the job options requeue's createQueue gives them (attempts 1, the same ` +
      `retention, a producer-side id from requeue's newJobId), in calls of ${replayBatch} jobs, the size of ` +
      `requeue's replay batches`,
    target: { kind: 'ratio', min: 1.0 },
  },
  'replay-vs-retry-jobs': {
    label: '4c. DLQ replay vs retryJobs (reference)',
    reference:
      "queue.retryJobs({ state: 'failed' }) of the failed set of 4a: it only moves ids " +
      'from one list of the queue to another, so it is no like-for-like target',
    target: { kind: 'reference' },
    requeueFrom: 'replay',
  },
};

/** requeue's policy in the retry scenarios: delays of a few ms, so the overhead shows. */
export const requeuePolicy: RetryPolicyInput = {
  strategy: 'full-jitter',
  baseMs: 1,
  capMs: 5,
  maxAttempts: 5,
};

/** Retention both sides use: requeue stamps these on every job (src/scheduler/queue.ts). */
const retention = { age: 7 * 24 * 3600, count: 10_000 };

/**
 * The options requeue's `createQueue().addBulk` stores with a job that has no
 * key, policy or delay (src/scheduler/queue.ts `jobOptions`), its id apart;
 * the requeue side checks that its stored jobs carry exactly these.
 */
export const requeueStoredOptions: JobsOptions = {
  attempts: 1,
  removeOnComplete: retention,
  removeOnFail: retention,
};

/** Options of a bare BullMQ job: BullMQ's own exponential backoff with full jitter. */
export const bullJobOptions: JobsOptions = {
  attempts: 5,
  backoff: { type: 'exponential', delay: 1, jitter: 1 },
  removeOnComplete: retention,
  removeOnFail: retention,
};

/** The error a handler throws: an HTTP-like failure with a status. */
export function httpError(status: number): Error & { status: number } {
  return Object.assign(new Error(`HTTP ${status}`), { status });
}
