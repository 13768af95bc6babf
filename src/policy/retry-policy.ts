import { z } from 'zod';
import { parseConfig } from '../util/parse-config.js';
import type { Random } from '../util/system.js';
import { computeDelay, strategyNames } from './backoff/index.js';
import { dueAfter } from './due-time.js';
import { limits } from './limits.js';

const delayMs = z.number().nonnegative().max(limits.delayMs);

/**
 * A retry policy as stored with a job: a strategy name and numbers, validated
 * here and nowhere else. Defaults are the values below.
 * @see Temporal's TypeScript SDK, `packages/common/src/retry-policy.ts` (one place to validate)
 */
export const retryPolicySchema = z
  .strictObject({
    /** Backoff strategy. @defaultValue `'full-jitter'` */
    strategy: z.enum(strategyNames).default('full-jitter'),
    /** First (base) delay in milliseconds. @defaultValue `1000` */
    baseMs: delayMs.default(1000),
    /** Longest delay in milliseconds; must be ≥ `baseMs`. @defaultValue `30000` */
    capMs: delayMs.default(30_000),
    /** Growth per retry of the exponential strategies. @defaultValue `2` */
    factor: z.number().min(1).max(limits.factor).default(2),
    /** Normal jitter's standard deviation as a fraction of the delay. @defaultValue `0.1` */
    jitter: z.number().min(0).max(1).default(0.1),
    /** Width in milliseconds of the Google strategy's uniform term. @defaultValue `1000` */
    randomMs: delayMs.default(1000),
    /**
     * The `schedule` strategy's delays in ms, retry by retry (the last one
     * repeated), each spread by ± `jitter` of itself. @defaultValue `[baseMs]`
     */
    scheduleMs: z.array(delayMs).min(1).max(limits.attempts).optional(),
    /** Attempts in all, the first one included. @defaultValue `5` */
    maxAttempts: z.int().min(1).max(limits.attempts).default(5),
    /** Give up once a retry would start later than this after the first failure. */
    maxElapsedMs: z.number().nonnegative().max(limits.elapsedMs).optional(),
  })
  .refine((policy) => policy.capMs >= policy.baseMs, {
    error: 'capMs must be ≥ baseMs',
    path: ['capMs'],
  })
  .refine((policy) => Math.max(0, ...(policy.scheduleMs ?? [])) <= policy.capMs, {
    error: 'every step must be ≤ capMs',
    path: ['scheduleMs'],
  });

/** A validated retry policy, every default filled in. */
export type RetryPolicy = z.output<typeof retryPolicySchema>;

/** A retry policy as written by a user: every field optional. */
export type RetryPolicyInput = z.input<typeof retryPolicySchema>;

/** The policy every field of which is its default. */
export const defaultRetryPolicy: Readonly<RetryPolicy> = Object.freeze(retryPolicySchema.parse({}));

/**
 * Validates a policy and fills in its defaults.
 * @throws ConfigError naming each bad field, e.g. `policy.capMs: capMs must be ≥ baseMs`.
 */
export function parseRetryPolicy(input: unknown, label = 'policy'): RetryPolicy {
  return parseConfig(retryPolicySchema, input, label);
}

/** What {@link planNextAttempt} needs to know about a job that has just failed. */
export interface AttemptContext {
  /** Attempts finished so far, including the one that just failed (≥ 1). */
  attemptsMade: number;
  /** The delay waited before the attempt that just failed, if it was a retry. */
  previousDelayMs?: number;
  /** When the first attempt failed, in ms since the epoch. */
  firstFailedAt: number;
  /** The current time, in ms since the epoch. */
  now: number;
  /** Uniform source for the jittered strategies. */
  random: Random;
  /** A delay the server asked for (e.g. Retry-After), already capped by the classifier. */
  serverDelayMs?: number;
}

/** The decision after a failure: retry at a time, or give up and say why. */
export type RetryDecision =
  | { kind: 'retry'; delayMs: number; retryAt: number; source: 'strategy' | 'server' }
  | { kind: 'give-up'; reason: 'max-attempts' | 'max-elapsed' };

/**
 * Decides what to do after a failed attempt. A server-directed delay replaces
 * the strategy's; either way the retry must start within `maxElapsedMs` of the
 * first failure (a retry exactly at the boundary is still allowed).
 * @throws RangeError if `attemptsMade` is not an integer ≥ 1.
 */
export function planNextAttempt(policy: RetryPolicy, ctx: AttemptContext): RetryDecision {
  const { attemptsMade, previousDelayMs, firstFailedAt, now, random, serverDelayMs } = ctx;
  if (!Number.isInteger(attemptsMade) || attemptsMade < 1) {
    throw new RangeError(`attemptsMade must be an integer ≥ 1, got ${attemptsMade}`);
  }
  if (attemptsMade >= policy.maxAttempts) return { kind: 'give-up', reason: 'max-attempts' };

  const fromServer = serverDelayMs !== undefined;
  const { delayMs, retryAt } = dueAfter(
    now,
    fromServer
      ? serverDelayMs
      : computeDelay(policy, { retry: attemptsMade - 1, previousDelayMs, random }),
  );

  if (policy.maxElapsedMs !== undefined && retryAt > firstFailedAt + policy.maxElapsedMs) {
    return { kind: 'give-up', reason: 'max-elapsed' };
  }
  return { kind: 'retry', delayMs, retryAt, source: fromServer ? 'server' : 'strategy' };
}
