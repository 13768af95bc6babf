import type { JobsOptions, Queue, Telemetry } from 'bullmq';
import type { z } from 'zod';
import { ConfigError } from '../errors/config-error.js';
import { formatZodError, parseConfig } from '../util/parse-config.js';
import { limits } from '../policy/limits.js';
import { parseBullPrefix, parseQueueName } from '../policy/queue-name.js';
import {
  parseRetryPolicy,
  type RetryPolicy,
  type RetryPolicyInput,
} from '../policy/retry-policy.js';
import { isCluster, resolveRedis, type RedisClient, type RedisLike } from '../redis/connection.js';
import { bullPrefix, requeueKeys } from '../redis/keys.js';
import {
  dispatchCost,
  dispatchKeySchema,
  dispatchWeightSchema,
  dispatchWeightsSchema,
} from '../policy/dispatch.js';
import { newBullQueue } from './bullmq/bull-queue.js';
import { assertSupportedBullmq } from './bullmq/version.js';
import { FairAdder, type FairEntry } from './bullmq/fair-dispatch.js';
import { newJobId } from '../util/system.js';
import { jobIdForKey, keyForJobId } from './job-id.js';
import type { JobMeta } from '../policy/job-state.js';

/** Options of {@link createQueue}. */
export interface QueueOptions<T = unknown> {
  /**
   * Redis URL or connection: one Redis, or an ioredis `Cluster`.
   * @defaultValue `REDIS_URL` (a Cluster's seed node when `REDIS_CLUSTER=1`), else `redis://127.0.0.1:6379`
   */
  connection?: RedisLike;
  /**
   * BullMQ's key prefix; workers of the queue must use the same. On a Redis
   * Cluster the queue's hash tag is added to it (`bull:{orders}`).
   * @defaultValue `'bull'`
   */
  prefix?: string;
  /**
   * BullMQ's OpenTelemetry hook, passed to its queue as is (see
   * `WorkerOptions.telemetry`): each add is one of BullMQ's spans.
   */
  telemetry?: Telemetry;
  /** The policy stamped on every job that brings none of its own. @defaultValue the worker's */
  policy?: RetryPolicyInput;
  /** A zod schema payloads must satisfy; a bad payload is refused at `add`. */
  schema?: z.ZodType<T>;
  /**
   * Weights of dispatch keys (see {@link AddOptions.dispatchKey}): a key's
   * share of the turns is its weight over the sum of the waiting keys'
   * weights. From 0.001 to 1000; 0 is refused (the key would never run).
   * @defaultValue every key weighs `1`
   */
  dispatchWeights?: Record<string, number>;
}

/** Options of one {@link RequeueQueue.add}. */
export interface AddOptions {
  /** A second add with the same key is a no-op while the first job is known. */
  idempotencyKey?: string;
  /** This job's own retry policy. */
  policy?: RetryPolicyInput;
  /** Wait this long before the first attempt. @defaultValue `0` */
  delayMs?: number;
  /** Extra string fields for a worker kind (stream id, endpoint id). */
  tags?: Record<string, string>;
  /**
   * Fair dispatch: the job's key (a tenant, an endpoint; 1–200 characters).
   * Jobs of different keys take turns (start-time fair queuing), so one
   * key's backlog delays only that key. A keyed job waits in BullMQ's
   * 'prioritized' set; jobs without a key (BullMQ's wait list) go first.
   * @defaultValue none: first in, first out
   */
  dispatchKey?: string;
  /**
   * The key's weight for this job, over the queue's `dispatchWeights`.
   * @defaultValue the queue's weight of the key, else `1`
   */
  dispatchWeight?: number;
}

/** A job as {@link RequeueQueue.add} reports it. */
export interface AddedJob {
  /** The job's id: for a keyed job, its key in requeue's id namespace (`src/scheduler/job-id.ts`). */
  id: string;
  name: string;
  /** The idempotency key the job was added with, if any. */
  key?: string;
}

/**
 * The producer side: adds jobs with an idempotency key and a policy, both
 * stored with the job so any worker can honour them.
 */
export class RequeueQueue<T = unknown> {
  /**
   * The BullMQ queue underneath.
   * @remarks escape hatch: BullMQ's own object; not covered by requeue's
   * guarantees. requeue's code outside `src/scheduler/bullmq/` does not use it;
   * prefer {@link RequeueQueue.prefix}, {@link RequeueQueue.hasJob} and
   * {@link RequeueQueue.counts}.
   */
  readonly bull: Queue;
  private readonly redis: RedisClient;
  private readonly owned: boolean;
  private readonly policy: RetryPolicy | undefined;
  private readonly weights: Record<string, number>;
  /**
   * BullMQ's key prefix the queue's keys live under (with the queue's hash
   * tag on a Redis Cluster): what `queue.prefix` gave, as used.
   */
  readonly prefix: string;
  private readonly fair: FairAdder;

  constructor(
    readonly name: string,
    private readonly options: QueueOptions<T> = {},
  ) {
    parseQueueName(name, 'queue');
    if (options.prefix !== undefined) parseBullPrefix(options.prefix, 'queue.prefix');
    assertSupportedBullmq();
    // Every option is checked before a connection is opened: a refused one leaves none behind.
    this.policy =
      options.policy === undefined ? undefined : parseRetryPolicy(options.policy, 'queue.policy');
    this.weights =
      options.dispatchWeights === undefined
        ? {}
        : parseConfig(dispatchWeightsSchema, options.dispatchWeights, 'queue.dispatchWeights');
    const { redis, owned } = resolveRedis(options.connection);
    this.redis = redis;
    this.owned = owned;
    this.prefix = bullPrefix(name, isCluster(redis), options.prefix);
    this.bull = newBullQueue(name, {
      connection: redis,
      prefix: this.prefix,
      ...(options.telemetry ? { telemetry: options.telemetry } : {}),
    });
    this.fair = new FairAdder(this.bull, redis, name, this.prefix);
    // Connection trouble surfaces as the rejection of the call that met it;
    // without a listener BullMQ would print every reconnection attempt.
    this.bull.on('error', () => undefined);
  }

  /** Adds one job; with an `idempotencyKey` a second add of that key is a no-op. */
  async add(name: string, data: T, opts: AddOptions = {}): Promise<AddedJob> {
    if (opts.dispatchKey !== undefined) {
      const entry: FairEntry = {
        name,
        data: this.validate(data, 'data'),
        opts: this.jobOptions(name, opts, ''),
      };
      this.keyed(entry, opts, '');
      return added(await this.fair.add(entry));
    }
    // One script call (BullMQ's add), not a MULTI of one (addBulk): half the cost per job.
    const job = await this.bull.add(
      name,
      this.validate(data, 'data'),
      this.jobOptions(name, opts, ''),
    );
    return added(job);
  }

  /** Adds many jobs in one round trip (atomically, as BullMQ's addBulk does). */
  async addBulk(jobs: { name: string; data: T; opts?: AddOptions }[]): Promise<AddedJob[]> {
    const entries = jobs.map(({ name, data, opts = {} }, index): FairEntry => {
      const label = jobs.length > 1 ? `jobs.${index}.` : '';
      const entry: FairEntry = {
        name,
        data: this.validate(data, `${label}data`),
        opts: this.jobOptions(name, opts, label),
      };
      if (opts.dispatchKey !== undefined) this.keyed(entry, opts, label);
      return entry;
    });
    // With a keyed job among them: one MULTI, each keyed add with its stamp; otherwise as before.
    if (!entries.some((entry) => entry.dispatch))
      return (await this.bull.addBulk(entries)).map(added);
    return (await this.fair.addAll(entries)).map(added);
  }

  /** Counts of jobs per state, the dead ones included. */
  async counts(): Promise<QueueCounts> {
    return queueCounts(this.bull, this.name, this.redis);
  }

  /** Whether a job with id `jobId` exists in the queue, in any state. Reads only. */
  async hasJob(jobId: string): Promise<boolean> {
    return (await this.bull.getJob(jobId)) !== undefined;
  }

  /**
   * Pauses the queue fleet-wide (BullMQ's pause: workers fetch nothing new,
   * due retries stay where they are; active jobs run on) until {@link resume}.
   */
  async pause(): Promise<void> {
    await this.bull.pause();
  }

  /** Resumes a paused queue. */
  async resume(): Promise<void> {
    await this.bull.resume();
  }

  /** Closes the queue and, if it opened it, the connection. */

  async close(): Promise<void> {
    await this.bull.close();
    if (this.owned) this.redis.disconnect();
  }

  /** Makes `entry` a keyed job: BullMQ priority 1, then its fair stamp. */
  private keyed(entry: FairEntry, opts: AddOptions, label: string): void {
    const key = parseConfig(dispatchKeySchema, opts.dispatchKey, `${label}dispatchKey`);
    const weight =
      opts.dispatchWeight !== undefined
        ? parseConfig(dispatchWeightSchema, opts.dispatchWeight, `${label}dispatchWeight`)
        : (this.weights[key] ?? 1);
    entry.opts.priority = 1;
    entry.dispatch = { key, cost: dispatchCost(weight) };
  }

  private validate(data: T, label: string): T {
    if (!this.options.schema) return data;
    const result = this.options.schema.safeParse(data);
    if (!result.success) throw new ConfigError(formatZodError(result.error, label));
    return result.data;
  }

  private jobOptions(name: string, opts: AddOptions, label: string): JobsOptions {
    checkAddOptions(name, opts, label);
    const meta: JobMeta = {};
    // The queue's policy was validated once, when the queue was made.
    const policy =
      opts.policy !== undefined ? parseRetryPolicy(opts.policy, 'policy') : this.policy;
    if (policy !== undefined) meta.policy = policy;
    if (opts.idempotencyKey !== undefined) meta.key = opts.idempotencyKey;
    if (opts.tags) meta.tags = opts.tags;
    const jobOpts: JobsOptions & { rq?: JobMeta } = {
      // requeue decides retries itself; BullMQ must never retry on its own.
      attempts: 1,
      removeOnComplete: { age: 7 * 24 * 3600, count: 10_000 },
      removeOnFail: { age: 7 * 24 * 3600, count: 10_000 },
    };
    // Every byte of options is read and written on each move: leave out an empty meta.
    if (Object.keys(meta).length > 0) jobOpts.rq = meta;
    // Every job gets its id here, at the producer: an add that the client
    // re-sends after a reconnect then finds its job instead of making another.
    jobOpts.jobId =
      opts.idempotencyKey !== undefined ? jobIdForKey(opts.idempotencyKey) : newJobId();
    if (opts.delayMs !== undefined && opts.delayMs > 0) jobOpts.delay = opts.delayMs;
    return jobOpts;
  }
}

/** A job as an add reports it: its key shown as the user gave it, not as its id. */
function added(job: { id?: string | undefined; name: string }): AddedJob {
  const id = String(job.id);
  const key = keyForJobId(id);
  return key === undefined ? { id, name: job.name } : { id, name: job.name, key };
}

/**
 * A job's name, idempotency key and delay, checked before anything is sent:
 * each is bounded (the key becomes the job id and part of Redis keys).
 */
/** Every option {@link AddOptions} has: any other is refused, naming it (a `delay` meant as `delayMs` is not ignored). */
const addOptionNames: ReadonlySet<string> = new Set<keyof AddOptions>([
  'idempotencyKey',
  'policy',
  'delayMs',
  'tags',
  'dispatchKey',
  'dispatchWeight',
]);

function checkAddOptions(name: string, opts: AddOptions, label: string): void {
  if (opts === null || typeof opts !== 'object')
    throw new ConfigError(`${label}options: must be an object`);
  for (const option of Object.keys(opts))
    if (!addOptionNames.has(option))
      throw new ConfigError(
        `${label}${option}: not an add option (${[...addOptionNames].join(', ')})`,
      );
  if (typeof name !== 'string' || name.length < 1 || name.length > limits.jobName)
    throw new ConfigError(`${label}name: must be 1–${limits.jobName} characters`);
  const key = opts.idempotencyKey;
  if (
    key !== undefined &&
    (typeof key !== 'string' || key.length < 1 || key.length > limits.idempotencyKey)
  )
    throw new ConfigError(`${label}idempotencyKey: must be 1–${limits.idempotencyKey} characters`);
  const delay = opts.delayMs;
  if (delay !== undefined && (!Number.isInteger(delay) || delay < 0 || delay > limits.delayMs))
    throw new ConfigError(
      `${label}delayMs: must be a whole number of ms from 0 to ${limits.delayMs}`,
    );
}

/** `requeue stats` counts. */
export interface QueueCounts {
  waiting: number;
  active: number;
  delayed: number;
  completed: number;
  failed: number;
  dead: number;
}

/** Reads the counts of a source queue and of its DLQ (read-only). */
export async function queueCounts(
  queue: Queue,
  name: string,
  redis: RedisClient,
): Promise<QueueCounts> {
  const [live, dead] = await Promise.all([
    queue.getJobCounts('waiting', 'prioritized', 'active', 'delayed', 'completed', 'failed'),
    redis.zcard(requeueKeys(name).dead),
  ]);
  return {
    waiting: (live.waiting ?? 0) + (live.prioritized ?? 0),
    active: live.active ?? 0,
    delayed: live.delayed ?? 0,
    completed: live.completed ?? 0,
    failed: live.failed ?? 0,
    dead,
  };
}

/** Creates a producer for `name`. */
export function createQueue<T = unknown>(
  name: string,
  options: QueueOptions<T> = {},
): RequeueQueue<T> {
  return new RequeueQueue<T>(name, options);
}
