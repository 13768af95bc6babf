import { z } from 'zod';
import { limits } from '../limits.js';
import { parseConfig } from '../../util/parse-config.js';

const tokens = z.number().int().max(limits.budgetTokens);

/**
 * What happens to a retry when the budget is empty: it is never dropped
 * (`src/policy/decide.ts` `applyEmptyBudget`). `delay`: it waits a spread
 * pause of ½–1 × `emptyDelayMs` (at most the policy's cap);
 * `delay-to-cap`: exactly the cap; `dead-letter`: it dies.
 */
const onEmpty = z.enum(['delay', 'delay-to-cap', 'dead-letter']).default('delay');
/**
 * The longest pause `onEmpty: 'delay'` gives a retry: the bucket refills only
 * as retries succeed, so the time to refill is not known; this bounds it.
 */
const emptyDelayMs = z.number().int().min(1).max(limits.delayMs).default(10_000);

/**
 * The AWS SDK's retry quota: a token bucket shared by the queue's workers.
 * @see seed 001, "retry budget / token bucket"; the AWS SDK's standard retry mode
 */
export const tokenBucketSchema = z.strictObject({
  kind: z.literal('token-bucket'),
  /** Tokens when full. @defaultValue `500` */
  capacity: tokens.positive().default(500),
  /** Tokens a retry costs. @defaultValue `5` */
  retryCost: tokens.min(0).default(5),
  /** Tokens a retry caused by a timeout costs. @defaultValue `10` */
  timeoutCost: tokens.min(0).default(10),
  /** Tokens a first-attempt success gives back. @defaultValue `1` */
  successRefund: tokens.min(0).default(1),
  /** @defaultValue `delay` */
  onEmpty,
  /** @defaultValue `10_000` */
  emptyDelayMs,
});

/**
 * The SRE book's rule: retries stay under a fraction of requests over a
 * sliding window.
 */
export const ratioBudgetSchema = z.strictObject({
  kind: z.literal('ratio'),
  /** Retries allowed per request. @defaultValue `0.1` */
  ratio: z.number().gt(0).max(1).default(0.1),
  /** The window's length. @defaultValue `10_000` */
  windowMs: z.number().int().positive().max(limits.windowMs).default(10_000),
  /** Retries always allowed per window, so a quiet queue can still retry. @defaultValue `10` */
  minRetries: tokens.min(0).default(10),
  /** @defaultValue `delay` */
  onEmpty,
  /** @defaultValue `10_000` */
  emptyDelayMs,
});

export const budgetOptionsSchema = z.preprocess(
  (input) =>
    input && typeof input === 'object' && !('kind' in input)
      ? { kind: 'token-bucket', ...input }
      : input,
  z.discriminatedUnion('kind', [tokenBucketSchema, ratioBudgetSchema]),
);

export type BudgetOptions = z.output<typeof budgetOptionsSchema>;
/** Budget options as written: `kind` may be left out for the token bucket. */
export type BudgetOptionsInput =
  | (Omit<z.input<typeof tokenBucketSchema>, 'kind'> & { kind?: 'token-bucket' })
  | z.input<typeof ratioBudgetSchema>;

/** Validates budget options; errors name the field (`budget.capacity: …`). */
export function parseBudgetOptions(input: unknown, label = 'budget'): BudgetOptions {
  return parseConfig(budgetOptionsSchema, input, label);
}

/** Tokens a retry costs: more when a timeout caused it (a timeout ties up the dependency longer). */
export function retryCost(options: BudgetOptions, timeout: boolean): number {
  if (options.kind !== 'token-bucket') return 1;
  return timeout ? options.timeoutCost : options.retryCost;
}

/**
 * Tokens a success gives back: a first-attempt success refunds a little, a
 * successful retry refunds what it cost.
 */
export function successRefund(
  options: BudgetOptions,
  attempt: number,
  lastRetryCost: number | undefined,
): number {
  if (options.kind !== 'token-bucket') return 0;
  return attempt <= 1 ? options.successRefund : (lastRetryCost ?? options.retryCost);
}
