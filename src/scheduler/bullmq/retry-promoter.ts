import type { Logger } from '../../config/logger.js';
import {
  earnCredit,
  fadeCredit,
  settleCredit,
  spendableJobs,
  type RetryShare,
} from '../../policy/retry-share.js';
import type { RedisClient } from '../../redis/connection.js';
import * as lua from '../../redis/lua-commands.js';
import type { Clock } from '../../util/system.js';
import { delayedScore, dueScoreBound, type BullKeys } from './bull-keys.js';

/** Options of {@link RetryPromoter}. */
export interface RetryPromoterOptions {
  redis: RedisClient;
  /** The queue's BullMQ keys (`bull-keys.ts`). */
  keys: BullKeys;
  /** Redis's time, as the worker keeps it (`clock-watch.ts`). */
  clock: Clock;
  logger: Logger;
  /** The credit rule: `share` per job fetched, fading over `windowMs`. */
  rule: RetryShare;
  /** Due jobs beyond the credit are held while more than this many jobs wait (the worker's concurrency). */
  holdAboveJobs: number;
  /** Whether the worker takes jobs now (not paused, not closing). */
  fetching: () => boolean;
  /** How often the timer runs. @defaultValue `25` */
  intervalMs?: number;
  /** How long a held job is put off each time (ms). @defaultValue `intervalMs` */
  holdMs?: number;
}

/** One run of `promoteRetries-6.lua`: jobs moved to the front, held, and the next delayed job. */
export interface PromotionRun {
  moved: number;
  held: number;
  /** The lowest score still in the delayed set (BullMQ's score), or `undefined` when it is empty. */
  nextScore: number | undefined;
}

/**
 * Moves due retries to the front of the wait list (`promoteRetries-6.lua`),
 * a bounded share of them: the worker earns credit as it fetches jobs
 * (`src/policy/retry-share.ts`) and each job moved spends 1.
 *
 * BullMQ's own fetches promote every due job to the back of the list, and
 * a busy worker fetches every few milliseconds: a timer alone would lose
 * nearly every due retry to them. So the script runs also just before each
 * of this worker's fetches ({@link beforeFetch}, sent first on the same
 * connection, so Redis runs it first) whenever a delayed job may be due, and
 * holds the due jobs it has no credit for (still delayed, put off by
 * `holdMs`) while a backlog waits, so that they wait their turn instead of
 * the whole backlog. The timer (every `intervalMs`, never overlapping
 * itself) learns the next due time and serves an idle worker.
 */
export class RetryPromoter {
  private credit = 0;
  /** When {@link credit} was last brought up to date. */
  private creditAt = Number.NEGATIVE_INFINITY;
  /** Jobs fetched since the credit was last brought up to date (no clock read per job). */
  private fetched = 0;
  /** The lowest delayed score known; −∞: not known, look. */
  private nextScore = Number.NEGATIVE_INFINITY;
  /** Runs sent and not answered (those before a fetch may overlap; the timer's never do). */
  private readonly running = new Set<Promise<void>>();
  private ticking: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private failing = false;
  private readonly intervalMs: number;
  private readonly holdMs: number;

  constructor(private readonly options: RetryPromoterOptions) {
    this.intervalMs = options.intervalMs ?? 25;
    this.holdMs = options.holdMs ?? this.intervalMs;
  }

  /** The worker fetched a job: credit earned. */
  noteFetched(): void {
    this.fetched += 1;
  }

  /**
   * Called synchronously just before the worker sends a fetch that promotes
   * delayed jobs: runs the script first when a delayed job may be due by the
   * fetch's bound (BullMQ's, on the same clock).
   */
  beforeFetch(): void {
    if (this.nextScore <= dueScoreBound(this.options.clock.now())) void this.run();
  }

  /** Starts the timer (unref'd; one run at a time). */
  start(): void {
    if (this.stopped || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.ticking = this.run().finally(() => {
        this.ticking = undefined;
        this.start();
      });
    }, this.intervalMs);
    this.timer.unref();
  }

  /** Stops the timer; resolves when the runs under way have ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await Promise.allSettled([this.ticking, ...this.running]);
  }

  /** One run of the script now, with the credit there is; nothing once stopped or while the worker does not fetch. */
  run(): Promise<void> {
    if (this.stopped || !this.options.fetching()) return Promise.resolve();
    const reserved = spendableJobs(this.fade());
    this.credit -= reserved;
    const running: Promise<void> = this.promote(reserved)
      .then(
        (run) => {
          this.credit = settleCredit(this.credit, reserved, run.moved);
          this.nextScore = run.nextScore ?? Number.POSITIVE_INFINITY;
          if (this.failing) this.options.logger.info('moving due retries to the front again');
          this.failing = false;
        },
        (err: unknown) => {
          this.credit = settleCredit(this.credit, reserved, 0);
          if (!this.failing)
            this.options.logger.warn(
              { err },
              'could not move due retries to the front; BullMQ promotes them meanwhile',
            );
          this.failing = true;
        },
      )
      .finally(() => this.running.delete(running));
    this.running.add(running);
    return running;
  }

  /**
   * The credit now: faded since it was last brought up to date, plus what the
   * jobs fetched since earned (counted unfaded: they are at most a run apart).
   */
  private fade(): number {
    const { rule, clock } = this.options;
    const now = clock.now();
    this.credit = earnCredit(
      rule,
      fadeCredit(rule, this.credit, now - this.creditAt),
      this.fetched,
    );
    this.fetched = 0;
    this.creditAt = now;
    return this.credit;
  }

  private promote(limit: number): Promise<PromotionRun> {
    const { redis, keys, clock, holdAboveJobs } = this.options;
    return promoteRetries(redis, keys, {
      now: clock.now(),
      limit,
      holdAboveJobs,
      holdMs: this.holdMs,
    });
  }
}

/**
 * One run of `promoteRetries-6.lua` at `now` (Redis's time): at most `limit`
 * due jobs of priority 0 to the front; with `holdAboveJobs`, the due jobs
 * beyond it put off by `holdMs` while more than that many jobs wait.
 */
export async function promoteRetries(
  redis: RedisClient,
  keys: BullKeys,
  run: { now: number; limit: number; holdAboveJobs?: number; holdMs?: number },
): Promise<PromotionRun> {
  const [moved, held, score] = await lua.promoteRetries(
    redis,
    [keys.delayed, keys.wait, keys.meta, keys.active, keys.marker, keys.events],
    [
      keys.prefix,
      dueScoreBound(run.now),
      run.limit,
      run.holdAboveJobs ?? -1,
      delayedScore(run.now + (run.holdMs ?? 0)),
    ],
  );
  return { moved, held, nextScore: score < 0 ? undefined : score };
}

/** The time constant of the retry share's credit (`src/policy/retry-share.ts`). */
const retryShareWindowMs = 5_000;

/** The worker's promoter for its `retryOrder`: none for `fifo` (BullMQ's own order). */
export function retryPromoterFor(
  order: { retryOrder?: 'first' | 'fifo' | undefined; retryShare?: number | undefined },
  options: Omit<RetryPromoterOptions, 'rule'>,
): RetryPromoter | undefined {
  if ((order.retryOrder ?? 'first') !== 'first') return undefined;
  return new RetryPromoter({
    ...options,
    rule: { share: order.retryShare ?? 0.5, windowMs: retryShareWindowMs },
  });
}
