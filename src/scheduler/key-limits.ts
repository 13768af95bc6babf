import type { Logger } from '../config/logger.js';
import type { LimitSignal } from '../policy/limit/aimd.js';
import { leaseMsOf, type AdaptiveConcurrency } from '../policy/limit/limit-options.js';
import type { AttemptOutcome } from '../policy/outcome.js';
import { LimitStore, type LimitParams } from '../redis/limit-store.js';
import type { RedisClient } from '../redis/connection.js';
import { newJobId, type Clock } from '../util/system.js';
import { attemptSignal } from './worker-limit.js';

/** A place under a key's fleet-wide limit, held by one attempt. */
export interface Lease {
  readonly key: string;
  readonly token: string;
  /** Redis's time of the acquire (ms). */
  readonly startedAt: number;
  /** This process's clock at the acquire, for the latency. */
  readonly localStart: number;
}

/**
 * Adaptive concurrency per key, shared by the fleet: an attempt past its
 * key's pause and bulkhead takes a lease under the key's learned limit
 * (`src/redis/limit-store.ts`) or is deferred as a full bulkhead defers it;
 * when it is over the lease is given back with what the attempt showed, and
 * the limit learns (`src/policy/limit/aimd.ts`). Giving back does not hold
 * the job: it is sent at once and waited for only at close.
 */
export class KeyLimits {
  readonly store: LimitStore;
  private readonly prefix = newJobId();
  private sequence = 0;
  private readonly pending = new Set<Promise<unknown>>();

  constructor(
    private readonly options: {
      redis: RedisClient;
      queue: string;
      params: LimitParams;
      clock: Clock;
      logger: Logger;
      /** Whether `key` is paused now (a 429 asked it): a failure then restarts the limit low. */
      paused: (key: string) => boolean;
    },
  ) {
    this.store = new LimitStore(options.redis, options.queue);
  }

  get params(): LimitParams {
    return this.options.params;
  }

  /** A lease under `key`'s limit, or undefined when the fleet runs as many as the limit allows. */
  async acquire(key: string): Promise<Lease | undefined> {
    const token = `${this.prefix}:${++this.sequence}`;
    const got = await this.store.acquire(key, token, this.options.params);
    if (!got.admitted) return undefined;
    // The latency the limit learns from starts once the place is held: the acquire's own round trip is not the key's.
    return { key, token, startedAt: got.now, localStart: this.options.clock.now() };
  }

  /** Gives `lease` back, the limit learning from `outcome` (none: requeue's own I/O failed). */
  release(lease: Lease, outcome: AttemptOutcome | undefined): void {
    const signal = this.signalOf(lease.key, outcome);
    const latencyMs = Math.max(0, this.options.clock.now() - lease.localStart);
    const sent = this.store
      .release(
        lease.key,
        lease.token,
        { signal, latencyMs, startedAt: lease.startedAt },
        this.options.params,
      )
      .catch((err: unknown) =>
        // The lease expires by itself (leaseMs); the limit misses one sample.
        this.options.logger.warn(
          { err, key: lease.key },
          'could not give back a concurrency lease',
        ),
      )
      .finally(() => this.pending.delete(sent));
    this.pending.add(sent);
  }

  /**
   * Gives `lease` back at once for an attempt answered 429 (`throttled`: the
   * limit is cut and recovers along CUBIC's curve) and answers the key's
   * 429s in a row, fleet-wide, this one included; undefined when Redis
   * failed (the lease then expires by itself).
   */
  async throttled(lease: Lease): Promise<number | undefined> {
    const latencyMs = Math.max(0, this.options.clock.now() - lease.localStart);
    const sample = { signal: 'throttled' as const, latencyMs, startedAt: lease.startedAt };
    try {
      return (await this.store.release(lease.key, lease.token, sample, this.options.params))
        .throttles;
    } catch (err) {
      this.options.logger.warn({ err, key: lease.key }, 'could not give back a concurrency lease');
      return undefined;
    }
  }

  /** Waits for the leases being given back. */
  async close(): Promise<void> {
    await Promise.allSettled([...this.pending]);
  }

  private signalOf(key: string, outcome: AttemptOutcome | undefined): LimitSignal {
    const failed = outcome?.kind === 'retry' || outcome?.kind === 'dead';
    return failed && this.options.paused(key) ? 'pause' : attemptSignal(outcome);
  }
}

/** The worker's adaptive limits, when its options turn them on. */
export function adaptiveLimits(
  adaptive: AdaptiveConcurrency | undefined,
  attemptTimeoutMs: number | undefined,
  rest: Omit<ConstructorParameters<typeof KeyLimits>[0], 'params'>,
): KeyLimits | undefined {
  if (!adaptive) return undefined;
  const leaseMs = leaseMsOf(adaptive, attemptTimeoutMs);
  return new KeyLimits(Object.assign({ params: Object.assign({}, adaptive, { leaseMs }) }, rest));
}
