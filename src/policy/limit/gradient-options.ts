import { z } from 'zod';
import { limits } from '../limits.js';
import { parseConfig } from '../../util/parse-config.js';

const count = z.number().int().min(1).max(limits.concurrency);

/**
 * The worker's own concurrency limit, learned from latency (a gradient
 * limiter, `src/policy/limit/gradient.ts`): the worker fetches at most this
 * many jobs at once, between `floor` and its `concurrency`. It starts at
 * `initial`, grows while attempts answer within `tolerance` × the fastest
 * latency it has seen, and shrinks as they slow down, fail or time out.
 * No Redis: each worker learns its own, from the latency every worker sees.
 */
export const concurrencyLimitSchema = z
  .strictObject({
    /** The limit never goes below this. @defaultValue `1` */
    floor: count.default(1),
    /** Where the limit starts (never above the worker's `concurrency`). @defaultValue `10` */
    initial: count.default(10),
    /**
     * Attempts may take this many times the no-load latency before the
     * limit shrinks. @defaultValue `1.5` (Netflix concurrency-limits' Gradient2 `rttTolerance`)
     */
    tolerance: z.number().min(1).max(100).default(1.5),
    /**
     * Latencies below this count as this: a handler of a few milliseconds
     * is not throttled by its own jitter. @defaultValue `10`
     */
    latencyFloorMs: z.number().int().min(0).max(limits.timeoutMs).default(10),
    /**
     * The no-load latency remembered may double over this long, so a
     * dependency that became slower for good is learnt again.
     * @defaultValue `300_000`
     */
    relearnMs: z.number().int().min(1_000).max(limits.windowMs).default(300_000),
  })
  .refine((o) => o.initial >= o.floor, { message: 'must be ≥ floor', path: ['initial'] });

export type ConcurrencyLimitOptions = z.output<typeof concurrencyLimitSchema>;
export type ConcurrencyLimitInput = z.input<typeof concurrencyLimitSchema>;

/** Validates the limit's options; errors name the field (`worker.concurrencyLimit.floor: …`). */
export function parseConcurrencyLimit(
  input: unknown,
  label = 'concurrencyLimit',
): ConcurrencyLimitOptions {
  return parseConfig(concurrencyLimitSchema, input, label);
}
