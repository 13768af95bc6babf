import type { Logger } from '../config/logger.js';
import type { JobMeta } from '../policy/job-state.js';
import { parseRetryPolicy, type RetryPolicy } from '../policy/retry-policy.js';
import type { RedisClient } from '../redis/connection.js';
import { RateStore } from '../redis/rate-store.js';
import type { RequeueJob } from './attempt/context.js';
import type { WorkerOptions } from './worker-options.js';

/**
 * What a worker decides per job from its options and the job itself: the
 * retry policy (the job's own, else the worker's), its key (`breakerKey`)
 * and how many jobs of that key may run at once here. A user function that
 * throws for one job must not take the worker down: it is logged, and the
 * job runs with the default.
 */
export class JobOptions<T> {
  private readonly policyCache = new Map<string, RetryPolicy>();
  private readonly defaultKeyConcurrency: number;
  /**
   * The time of the key's next rate-limit slot, reserved for this job (≤
   * `now`: go now), or `undefined` for no limit; absent without `rateLimit`.
   */
  readonly rateSlot:
    ((job: RequeueJob<T>, key: string, now: number) => Promise<number | undefined>) | undefined;

  constructor(
    private readonly options: WorkerOptions<T>,
    private readonly policy: RetryPolicy,
    private readonly logger: Logger,
    redis?: RedisClient,
    queue?: string,
  ) {
    this.defaultKeyConcurrency = Math.max(1, Math.ceil((options.concurrency ?? 1) / 4));
    const rateLimit = options.rateLimit;
    if (rateLimit && redis && queue !== undefined) {
      const rates = new RateStore(redis, queue);
      this.rateSlot = async (job, key, now) => {
        let limit;
        try {
          limit = await rateLimit(job);
        } catch (err) {
          this.logger.warn({ err, jobId: job.id }, 'rateLimit threw; running the job unlimited');
          return undefined;
        }
        return limit === undefined ? undefined : rates.reserve(key, limit, now);
      };
    }
  }

  /** The job's own policy, validated once per distinct policy rather than once per job. */
  policyOf(meta: JobMeta): RetryPolicy {
    if (!meta.policy) return this.policy;
    const key = JSON.stringify(meta.policy);
    let policy = this.policyCache.get(key);
    if (!policy) {
      policy = parseRetryPolicy(meta.policy, 'job.policy');
      if (this.policyCache.size >= 1000) this.policyCache.clear();
      this.policyCache.set(key, policy);
    }
    return policy;
  }

  /** The job's own key (`breakerKey(job)`), or none. */
  keyOf(job: RequeueJob<T>): string | undefined {
    if (!this.options.breakerKey) return undefined;
    try {
      return this.options.breakerKey(job);
    } catch (err) {
      this.logger.warn({ err, jobId: job.id }, 'breakerKey threw; running the job without a key');
      return undefined;
    }
  }

  /** How many jobs of one key may run at once here: the option, else a quarter of the slots. */
  keyConcurrencyOf(job: RequeueJob<T>): number {
    const option = this.options.keyConcurrency;
    if (typeof option === 'number') return option;
    if (typeof option === 'function') {
      try {
        const limit = option(job);
        if (limit !== undefined && Number.isInteger(limit) && limit >= 1) return limit;
      } catch (err) {
        this.logger.warn({ err, jobId: job.id }, 'keyConcurrency threw; using the default');
      }
    }
    return this.defaultKeyConcurrency;
  }
}
