import type { RedisClient } from '../redis/connection.js';
import type { Logger } from '../config/logger.js';
import type { BreakerOptions } from '../policy/breaker/breaker-options.js';
import { admit, type Admission, type BreakerState } from '../policy/breaker/breaker.js';
import { toBreakerState } from '../policy/breaker/breaker-state.js';
import { countJob, type FailureStreak, type JobCount } from '../policy/breaker/job-count.js';
import { retryCost, type BudgetOptions } from '../policy/budget/budget-options.js';
import { BreakerStore, type BreakerMessage, type OutcomeBatch } from '../redis/breaker-store.js';
import { windowLengthMs, type WindowGeometry } from '../policy/window.js';
import { BudgetStore } from '../redis/budget-store.js';
import { followChannel, type Follower } from '../redis/follow-channel.js';
import type { Clock } from '../util/system.js';
import type { TypedEmitter, WorkerEvents } from './events.js';
import type { FetchPause } from './bullmq/fetch-pause.js';

/** The breaker key of the queue-wide breaker (when no `breakerKey` is given). */
export const queueBreakerKey = '__queue__';

export interface BreakerGateOptions {
  redis: RedisClient;
  queue: string;
  breaker?: BreakerOptions;
  budget?: BudgetOptions;
  clock: Clock;
  logger: Logger;
  /** Called for every transition any worker makes, this one included. */
  onTransition: (message: BreakerMessage) => void;
}

type Pending = OutcomeBatch;

const allow: Admission = Object.freeze({ kind: 'allow' });

/**
 * A worker's view of the shared breaker and budget. Cheap when healthy: a
 * closed circuit is known from a local cache kept current by pub/sub, so
 * admitting a job costs no round trip, and outcomes go to Redis in batches.
 * Only an open circuit past its half-open time, and probes, ask Redis.
 */
export class BreakerGate {
  readonly breakers: BreakerStore | undefined;
  readonly budget: BudgetStore | undefined;
  private readonly cache = new Map<string, BreakerState>();
  private readonly pending = new Map<string, Pending>();
  /** Keys with a failure sent to Redis and not yet judged there: their admissions wait for it. */
  private readonly judging = new Map<string, Promise<void>>();
  private pendingCount = 0;
  private refund = 0;
  private requests = 0;
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();
  private follower: Follower | undefined;

  constructor(private readonly options: BreakerGateOptions) {
    // Workers started with other window options share the live window on its
    // stored geometry (src/policy/window.ts); say so once, not per batch.
    const warned = new Set<string>();
    const warnOnce = (what: string, stored: WindowGeometry, own: WindowGeometry) => {
      if (warned.has(what)) return;
      warned.add(what);
      options.logger.warn(
        {
          window: what,
          stored: { windowMs: windowLengthMs(stored), buckets: stored.buckets },
          own: { windowMs: windowLengthMs(own), buckets: own.buckets },
        },
        'the shared window in Redis has other options than this worker; the stored ones apply ' +
          'until the window goes quiet or is reset (requeue breaker close)',
      );
    };
    if (options.breaker)
      this.breakers = new BreakerStore(options.redis, options.queue, options.breaker, {
        onForeignGeometry: (key, stored, own) => warnOnce(`breaker:${key}`, stored, own),
      });
    if (options.budget)
      this.budget = new BudgetStore(options.redis, options.queue, options.budget, {
        onForeignGeometry: (stored, own) => warnOnce('budget', stored, own),
      });
  }

  /** Subscribes to transitions and loads the circuits that are not closed. */
  async start(): Promise<void> {
    if (!this.breakers) return;
    this.follower = await followChannel({
      redis: this.options.redis,
      channel: this.breakers.channel,
      what: 'breaker',
      logger: this.options.logger,
      reload: () => this.reload(),
      onMessage: (raw) => {
        const message = raw as BreakerMessage;
        const state = toBreakerState(message.state);
        if (!state || typeof message.key !== 'string') throw new Error('not a breaker message');
        this.apply({ ...message, state });
      },
    });
  }

  /** The cached state of a key (undefined: closed, as far as this worker knows). */
  stateOf(key: string): BreakerState | undefined {
    return this.cache.get(key);
  }

  /**
   * May a job of `key` run? Closed circuits answer from the cache. While a
   * failure of `key` this worker saw is on its way to Redis, the answer
   * waits for Redis's verdict on it: a fleet failing every call then stops
   * at `minimumRequests` failures plus the attempts already in flight, not
   * after as many more as its workers start in a round trip or two.
   * `retry`: the job already failed once (it may probe first, half-open).
   */
  check(key: string, probeId: () => string, retry = true): Admission | Promise<Admission> {
    if (!this.breakers) return allow;
    const judging = this.judging.get(key);
    if (judging) return judging.then(() => this.check(key, probeId, retry));
    // The healthy path answers synchronously: no promise, no round trip.
    const cached = this.cache.get(key);
    if (!cached || cached.phase === 'closed') return allow;
    return this.checkOpen(key, cached, probeId(), retry);
  }

  private async checkOpen(
    key: string,
    cached: BreakerState,
    probeId: string,
    retry: boolean,
  ): Promise<Admission> {
    const now = this.options.clock.now();
    if (cached.phase === 'open' || cached.phase === 'isolated') {
      // An open circuit turns jobs away by the cached state alone, by the same rule as in Redis.
      const local = admit(cached, now, probeId, this.options.breaker!, retry);
      if (local.verdict.kind === 'reject' && local.transition === undefined) return local.verdict;
    }
    const { admission, message } = await this.breakers!.admit(key, probeId, now, retry);
    if (message) this.apply(message);
    return admission;
  }

  /**
   * Records an attempt's outcome for `key`'s window. A probe's result is
   * sent at once (it decides the circuit); others wait for the next batch.
   * `counted`: what the attempt adds to the window (`countJob`: jobs, each
   * by its latest attempt); one outcome per attempt when absent.
   */
  outcome(
    key: string,
    success: boolean,
    probeId?: string,
    counted?: { total: number; failures: number },
  ): Promise<void> | undefined {
    if (!this.breakers) return undefined;
    if (probeId !== undefined) return this.probeOutcome(key, probeId, success);
    const entry = this.pending.get(key) ?? {
      successes: 0,
      failures: 0,
      trailingFailures: 0,
      counted: { total: 0, failures: 0 },
    };
    if (success) {
      entry.successes += 1;
      entry.trailingFailures = 0;
    } else {
      entry.failures += 1;
      entry.trailingFailures += 1;
    }
    entry.counted!.total += counted?.total ?? 1;
    entry.counted!.failures += counted?.failures ?? (success ? 0 : 1);
    this.pending.set(key, entry);
    this.pendingCount += 1;
    // Successes wait for the batch; a failure goes out at once (with whatever is
    // pending), and this key's next admission waits for Redis's verdict on it,
    // so that a failing dependency trips the breaker after minimumRequests
    // calls plus those in flight, not after a batch interval's worth of them.
    if (success) this.schedule();
    else {
      const judged = this.flush();
      this.judging.set(key, judged);
      void judged.then(() => {
        if (this.judging.get(key) === judged) this.judging.delete(key);
      });
    }
    return undefined;
  }

  /** What an attempt adds to its breaker's window (`countJob`): jobs, each by its latest attempt. */
  countJob(success: boolean, streak: FailureStreak | undefined, now: number): JobCount | undefined {
    return this.options.breaker ? countJob(success, streak, now, this.options.breaker) : undefined;
  }

  private async probeOutcome(key: string, probeId: string, success: boolean): Promise<void> {
    const now = this.options.clock.now();
    const message = await this.breakers!.probeResult(key, probeId, success, now);
    if (message) this.apply(message);
  }

  /** Takes a retry from the budget; true when granted (or when there is no budget). */
  async takeRetry(timeout: boolean): Promise<{ granted: boolean; cost: number }> {
    if (!this.budget) return { granted: true, cost: 0 };
    const cost = retryCost(this.budget.options, timeout);
    const granted = await this.budget.take(cost);
    return { granted, cost: granted ? cost : 0 };
  }

  /** Notes a finished attempt for the budget: a refund on success, a request for the ratio. */
  settle(refund: number): void {
    if (!this.budget) return;
    this.refund += refund;
    this.requests += 1;
    this.pendingCount += 1;
    this.schedule();
  }

  /** Sends what is pending now. */
  flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    const batch = [...this.pending];
    const refund = this.refund;
    const requests = this.requests;
    this.pending.clear();
    this.pendingCount = 0;
    this.refund = 0;
    this.requests = 0;
    if (batch.length === 0 && refund === 0 && requests === 0) return this.flushing;
    this.flushing = this.flushing.then(async () => {
      const now = this.options.clock.now();
      try {
        for (const [key, outcomes] of batch) {
          const message = await this.breakers?.record(key, outcomes, now);
          if (message) this.apply(message);
        }
        await this.budget?.settle(refund, requests);
      } catch (err) {
        this.options.logger.warn(
          { err },
          'could not record outcomes; the breaker window misses this batch',
        );
      }
    });
    return this.flushing;
  }

  async close(): Promise<void> {
    this.follower?.stop();
    this.follower = undefined;
    await this.flush();
  }

  private schedule(): void {
    const flushSize = this.options.breaker?.flushSize ?? 64;
    if (this.pendingCount >= flushSize) {
      void this.flush();
      return;
    }
    if (!this.timer) {
      this.timer = setTimeout(
        () => void this.flush(),
        this.options.breaker?.flushIntervalMs ?? 100,
      );
      this.timer.unref();
    }
  }

  private apply(message: BreakerMessage): void {
    const previous = this.cache.get(message.key);
    if (message.state.phase === 'closed') this.cache.delete(message.key);
    else this.cache.set(message.key, message.state);
    // The same transition arrives twice for the worker that made it (return value and
    // pub/sub), and again from a reload: tell the worker about each change once.
    if (previous && sameEpisode(previous, message.state)) return;
    if (!previous && message.state.phase === 'closed') return;
    this.options.onTransition(message);
  }

  private async reload(): Promise<void> {
    if (!this.breakers) return;
    try {
      const open = await this.breakers.openBreakers();
      for (const key of [...this.cache.keys()]) {
        if (!open.has(key))
          this.apply({
            key,
            transition: 'closed',
            state: { phase: 'closed', trips: 0, probes: {}, probeSuccesses: 0 },
          });
      }
      for (const [key, state] of open) {
        const transition =
          state.phase === 'half-open'
            ? 'half-open'
            : state.phase === 'closed'
              ? 'closed'
              : 'opened';
        this.apply({ key, transition, state });
      }
    } catch (err) {
      this.options.logger.warn({ err }, 'could not load breaker states');
    }
  }
}

/** Whether two states are the same phase of the same trip (probe bookkeeping aside). */
function sameEpisode(a: BreakerState, b: BreakerState): boolean {
  return (
    a.phase === b.phase &&
    a.trips === b.trips &&
    ('halfOpenAt' in a ? a.halfOpenAt : undefined) ===
      ('halfOpenAt' in b ? b.halfOpenAt : undefined)
  );
}

/** What {@link announceTransition} needs from its worker. */
export interface TransitionContext {
  readonly queue: string;
  /** The worker's breaker is the queue-wide one (no `breakerKey`): opening it pauses fetching. */
  readonly queueWide: boolean;
  readonly logger: Logger;
  readonly events: TypedEmitter<WorkerEvents>;
  readonly fetch: FetchPause;
}

/**
 * Logs and announces a breaker transition heard from Redis; the queue-wide
 * breaker also pauses and resumes fetching.
 */
export function announceTransition(ctx: TransitionContext, message: BreakerMessage): void {
  const { key, state } = message;
  const event = { queue: ctx.queue, key };
  if (state.phase === 'open' || state.phase === 'isolated') {
    const halfOpenAt = state.phase === 'open' ? state.halfOpenAt : Number.POSITIVE_INFINITY;
    ctx.logger.warn(
      {
        key,
        halfOpenAt: Number.isFinite(halfOpenAt)
          ? new Date(halfOpenAt).toISOString()
          : 'never (isolated)',
        trips: state.trips,
      },
      'breaker opened',
    );
    ctx.events.safeEmit(ctx.logger, 'breaker:opened', { queue: ctx.queue, key, halfOpenAt });
    if (key === queueBreakerKey && ctx.queueWide) ctx.fetch.pause(halfOpenAt);
  } else if (state.phase === 'half-open') {
    ctx.logger.info({ key }, 'breaker half-open');
    ctx.events.safeEmit(ctx.logger, 'breaker:half-open', event);
  } else {
    ctx.logger.info({ key }, 'breaker closed');
    ctx.events.safeEmit(ctx.logger, 'breaker:closed', event);
    if (key === queueBreakerKey) ctx.fetch.resume();
  }
}
