import type { Logger } from '../../config/logger.js';
import {
  earnCredit,
  fadeCredit,
  msPerCredit,
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
  /** The queue's `requeueKeys(…).retryTail`: the front block's tail marker. */
  tailKey: string;
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
  /** How long the first held job is put off (ms); the others, about until the credit covers them. @defaultValue `intervalMs` */
  holdMs?: number;
}

/** A front block longer than this is not looked for (LPOS's bound): later runs' retries go in front of it. */
export const maxFrontBlock = 1_000;
/** A held retry is put off at most this much beyond `holdMs` (ms), however slowly the worker earns credit. */
export const maxHoldMs = 1_000;
/** Held retries fall due at this fraction of the time the credit takes: early rather than late. */
const holdPace = 0.5;
/** The fetch rate is measured over at least this long (ms). */
const rateWindowMs = 500;

/** One run of `promoteRetries-7.lua`: jobs moved to the front, held, and the next delayed job. */
export interface PromotionRun {
  moved: number;
  held: number;
  /** The lowest score still in the delayed set (BullMQ's score), or `undefined` when it is empty. */
  nextScore: number | undefined;
}

/**
 * Moves due retries to the front of the wait list (`promoteRetries-7.lua`),
 * a bounded share of them: the worker earns credit as it fetches jobs
 * (`src/policy/retry-share.ts`) and each job moved spends 1. Each run's
 * retries go behind those earlier runs moved and no worker fetched yet, so
 * retries start in due order across runs.
 *
 * BullMQ's own fetches promote every due job to the back of the list, and
 * a busy worker fetches every few milliseconds: a timer alone would lose
 * nearly every due retry to them. So the script runs also just before each
 * of this worker's fetches ({@link beforeFetch}, sent first on the same
 * connection, so Redis runs it first) whenever a delayed job may be due, and
 * holds the due jobs it has no credit for (still delayed) while a backlog
 * waits, so that they wait their turn instead of the whole backlog: each
 * put off until about when the credit would cover it, at the rate the worker
 * fetched over the last half second or so (at most {@link maxHoldMs} more). The timer (every `intervalMs`, never overlapping
 * itself) learns the next due time and serves an idle worker.
 */
export class RetryPromoter {
  private credit = 0;
  /** When {@link credit} was last brought up to date. */
  private creditAt = Number.NEGATIVE_INFINITY;
  /** Jobs fetched since the credit was last brought up to date (no clock read per job). */
  private fetched = 0;
  /** Jobs fetched per ms, as last measured (0: not yet). */
  private fetchRate = 0;
  private rateFetched = 0;
  private rateSince = Number.NEGATIVE_INFINITY;
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
   * fetch's bound (BullMQ's, on the same clock). `now`: the fetch's own
   * time (Redis's, as the worker keeps it), when the caller has read it.
   */
  beforeFetch(now = this.options.clock.now()): void {
    if (this.nextScore <= dueScoreBound(now)) void this.run();
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
    this.rateFetched += this.fetched;
    this.fetched = 0;
    this.creditAt = now;
    if (now - this.rateSince >= rateWindowMs) {
      if (Number.isFinite(this.rateSince))
        this.fetchRate = this.rateFetched / (now - this.rateSince);
      this.rateFetched = 0;
      this.rateSince = now;
    }
    return this.credit;
  }

  private promote(limit: number): Promise<PromotionRun> {
    const { redis, keys, tailKey, clock, holdAboveJobs, rule } = this.options;
    return promoteRetries(redis, keys, tailKey, {
      now: clock.now(),
      limit,
      holdAboveJobs,
      holdMs: this.holdMs,
      holdStepMs: holdPace * msPerCredit(rule, this.fetchRate),
    });
  }
}

/**
 * One run of `promoteRetries-7.lua` at `now` (Redis's time): at most `limit`
 * due jobs of priority 0 to the front, behind the ones earlier runs moved
 * and no worker fetched yet (`tailKey` marks them); with `holdAboveJobs`,
 * the due jobs beyond it put off while more than that many jobs wait, the
 * first by `holdMs`, each next `holdStepMs` later (at most {@link maxHoldMs}).
 */
export async function promoteRetries(
  redis: RedisClient,
  keys: BullKeys,
  tailKey: string,
  run: {
    now: number;
    limit: number;
    holdAboveJobs?: number;
    holdMs?: number;
    holdStepMs?: number;
  },
): Promise<PromotionRun> {
  const [moved, held, score] = await lua.promoteRetries(
    redis,
    [keys.delayed, keys.wait, keys.meta, keys.active, keys.marker, keys.events, tailKey],
    [
      keys.prefix,
      dueScoreBound(run.now),
      run.limit,
      run.holdAboveJobs ?? -1,
      delayedScore(run.now + (run.holdMs ?? 0)),
      run.holdStepMs ?? 0,
      maxFrontBlock,
      maxHoldMs,
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
