import { z } from 'zod';
import { limits } from '../limits.js';
import { parseConfig } from '../../util/parse-config.js';

const count = z.number().int().min(1).max(limits.concurrency);

/**
 * Adaptive concurrency per key: how many attempts of one key (a webhook
 * endpoint, a tenant) the whole fleet runs at once, learned from latency and
 * failures and kept in Redis (`src/redis/limit-store.ts`). The limit starts
 * at `initial`, grows while attempts succeed within `latencyTargetMs`, and
 * shrinks by `backoffRatio` on a timeout, a retryable failure, a slow
 * success or a 429; after a 429 it comes back to where it was within
 * `recoveryMs` along CUBIC's curve. A key that keeps answering 429 is paused
 * whole (`pauseAfter429s`, `pauseRetryAfterMs`: `src/policy/limit/throttle.ts`).
 * @see src/policy/limit/aimd.ts
 */
export const adaptiveConcurrencySchema = z
  .strictObject({
    /** The limit never goes below this. @defaultValue `1` */
    floor: count.default(1),
    /** The limit never goes above this. @defaultValue `100` */
    ceiling: count.default(100),
    /** Where a key with no state starts. @defaultValue `10` */
    initial: count.default(10),
    /**
     * A success slower than this counts as overload (the dependency is
     * queueing). @defaultValue `5_000`
     */
    latencyTargetMs: z.number().int().min(1).max(limits.timeoutMs).default(5_000),
    /**
     * How much the limit grows per limit's worth of successes (about one
     * round trip), as TCP's congestion avoidance does. @defaultValue `1`
     */
    additiveIncrease: z.number().min(0.01).max(limits.concurrency).default(1),
    /** What the limit is multiplied by on overload (once per round trip), as CUBIC's β (RFC 8312; the AWS SDK's adaptive mode). @defaultValue `0.7` */
    backoffRatio: z.number().gt(0).lt(1).default(0.7),
    /**
     * After a 429 cut the limit (×`backoffRatio`), how long it takes to come
     * back to where it was, along CUBIC's concave curve. @defaultValue `2_000`
     */
    recoveryMs: z.number().int().min(1).max(limits.windowMs).default(2_000),
    /**
     * 429s in a row, fleet-wide, with no success between, after which the
     * key is paused whole until the last one's `Retry-After` (1 s without
     * one); below it a 429 holds back only its own job and cuts the limit.
     * @defaultValue `5`
     */
    pauseAfter429s: z.number().int().min(1).max(1_000).default(5),
    /**
     * A 429 whose `Retry-After` is at least this long pauses the whole key at
     * once: the receiver is asking everyone to stay away. @defaultValue `30_000`
     */
    pauseRetryAfterMs: z.number().int().min(1).max(limits.delayMs).default(30_000),
    /**
     * How long a worker's place under the limit lasts if it never gives it
     * back (it crashed). Keep it above the longest attempt.
     * @defaultValue `attemptTimeoutMs` + 5 s, or 60 s without a timeout
     */
    leaseMs: z.number().int().min(100).max(limits.timeoutMs).optional(),
    /**
     * A key nobody touched for this long loses its learned limit (back to
     * `initial`). @defaultValue `600_000`
     */
    idleMs: z.number().int().min(1_000).max(limits.windowMs).default(600_000),
  })
  .superRefine((o, ctx) => {
    if (o.floor > o.ceiling)
      ctx.addIssue({ code: 'custom', path: ['floor'], message: 'must be ≤ ceiling' });
    if (o.initial < o.floor || o.initial > o.ceiling)
      ctx.addIssue({
        code: 'custom',
        path: ['initial'],
        message: 'must be between floor and ceiling',
      });
  });

export type AdaptiveConcurrency = z.output<typeof adaptiveConcurrencySchema>;
export type AdaptiveConcurrencyInput = z.input<typeof adaptiveConcurrencySchema>;

/** Validates adaptive-concurrency options; errors name the field (`adaptiveConcurrency.floor: …`). */
export function parseAdaptiveConcurrency(
  input: unknown,
  label = 'adaptiveConcurrency',
): AdaptiveConcurrency {
  return parseConfig(adaptiveConcurrencySchema, input, label);
}

/** A lease's length: the option, else the attempt timeout plus 5 s, else 60 s. */
export function leaseMsOf(
  options: AdaptiveConcurrency,
  attemptTimeoutMs: number | undefined,
): number {
  return options.leaseMs ?? (attemptTimeoutMs !== undefined ? attemptTimeoutMs + 5_000 : 60_000);
}
