import { z } from 'zod';
import { limits } from '../limits.js';
import { parseConfig } from '../../util/parse-config.js';

/** Every duration of the breaker: positive, at most a day (`src/policy/limits.ts`). */
const positiveMs = z.number().int().positive().max(limits.windowMs);
/** Every count of the breaker: at most a million. */
const maxCount = 1_000_000;

/**
 * Options of the circuit breaker shared by a queue's workers, with their
 * defaults in one place.
 */
export const breakerOptionsSchema = z
  .strictObject({
    /** Open when failures / total in the window reach this. @defaultValue `0.5` */
    failureRate: z.number().gt(0).max(1).default(0.5),
    /** …and the window holds at least this many outcomes. @defaultValue `10` */
    minimumRequests: z.number().int().min(1).max(maxCount).default(10),
    /** The sliding window's length. @defaultValue `10_000` */
    windowMs: positiveMs.default(10_000),
    /** The window is kept in this many buckets. @defaultValue `10` */
    buckets: z.number().int().min(1).max(600).default(10),
    /** Also open after this many failures in a row, if set. */
    consecutiveFailures: z.number().int().min(1).max(maxCount).optional(),
    /**
     * How long the circuit stays open before probing: short, so that a
     * dependency back after a short outage is found soon; repeated trips
     * lengthen it (`openFactor`). @defaultValue `5_000`
     */
    openMs: positiveMs.default(5_000),
    /** Each repeated trip (a failed half-open) multiplies the open time by this (1: constant). @defaultValue `2` */
    openFactor: z.number().min(1).max(limits.factor).default(2),
    /** The open time never exceeds this. @defaultValue `30_000`, or `openMs` if longer */
    maxOpenMs: positiveMs.optional(),
    /** Trial jobs let through, fleet-wide, while half-open. @defaultValue `1` */
    halfOpenProbes: z.number().int().min(1).max(1_000).default(1),
    /**
     * The half-open period closes when at least this share of its
     * `halfOpenProbes` probes succeed, and ramps probes up one per success;
     * 1 closes only if every probe succeeds (the first failure reopens).
     * @defaultValue `1`
     */
    halfOpenSuccessRatio: z.number().gt(0).max(1).default(1),
    /** A probe that reports nothing for this long frees its slot (its worker died). @defaultValue `30_000` */
    probeTimeoutMs: positiveMs.default(30_000),
    /** A job turned away while half-open waits this long before it asks again. @defaultValue `1_000` */
    halfOpenRetryMs: positiveMs.default(1_000),
    /**
     * While half-open, a job that already failed (a retry) may probe at
     * once, a job's first attempt only this long after the half-open time:
     * the dependency is judged first by the jobs that show whether retrying
     * works, so a flaky one whose retries succeed closes, and a down one
     * whose retries fail reopens. 0: any job probes at once (as before).
     * @defaultValue `1_000`
     */
    firstTryProbeDelayMs: z.number().int().min(0).max(limits.windowMs).default(1_000),
    /**
     * A job turned away by an isolated circuit (forced open by hand) waits
     * this long before it asks again. @defaultValue `10_000`
     */
    isolatedRetryMs: positiveMs.default(10_000),
    /** A job is deferred at most this many times, then dead-lettered (`max-deferrals`). @defaultValue `1_000` */
    maxDeferrals: z.number().int().min(1).max(maxCount).default(1_000),
    /** Outcomes are sent to Redis at least this often. @defaultValue `100` */
    flushIntervalMs: positiveMs.default(100),
    /** …or as soon as this many are waiting. @defaultValue `64` */
    flushSize: z.number().int().min(1).max(10_000).default(64),
    /**
     * A key's breaker state and window expire this long after their last
     * write, and the key leaves the set of keys seen: a key idle this long
     * starts closed. A circuit isolated by hand never expires.
     * @defaultValue `600_000` (10 minutes)
     */
    idleMs: positiveMs.default(600_000),
  })
  .refine((o) => o.maxOpenMs === undefined || o.maxOpenMs >= o.openMs, {
    message: 'maxOpenMs must be ≥ openMs',
    path: ['maxOpenMs'],
  })
  .transform((o) => ({ ...o, maxOpenMs: o.maxOpenMs ?? Math.max(o.openMs, 30_000) }))
  .refine((o) => o.idleMs >= o.windowMs && o.idleMs >= o.maxOpenMs, {
    message: 'idleMs must be ≥ windowMs and ≥ maxOpenMs',
    path: ['idleMs'],
  });

export type BreakerOptions = z.output<typeof breakerOptionsSchema>;
export type BreakerOptionsInput = z.input<typeof breakerOptionsSchema>;

/** Validates breaker options; errors name the field (`breaker.failureRate: …`). */
export function parseBreakerOptions(input: unknown, label = 'breaker'): BreakerOptions {
  return parseConfig(breakerOptionsSchema, input, label);
}
