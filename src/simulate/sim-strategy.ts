import type { Random } from '../util/system.js';
import { SeededStream } from '../util/random.js';
import {
  computeDelay,
  strategyNames,
  type BackoffInput,
  type StrategyName,
} from '../policy/backoff/index.js';
import type { RetryPolicy } from '../policy/retry-policy.js';

/**
 * What a simulated client does after a failure: one of the workers'
 * strategies, or `none` (retry at once), the baseline every study starts from.
 */
export type SimStrategy = StrategyName | 'none';

/**
 * Every strategy a simulation can run, in the order `requeue plan` lists
 * them, then `none`. Not `schedule`: a list of steps is a product's choice
 * (`requeue plan --preset webhook`), not a formula to compare under contention.
 */
export const simStrategies: readonly SimStrategy[] = [
  ...strategyNames.filter((s) => s !== 'schedule'),
  'none',
];

/** Whether `name` is a strategy a simulation can run. */
export function isSimStrategy(name: string): name is SimStrategy {
  return (simStrategies as readonly string[]).includes(name);
}

/**
 * The delays of one strategy's clients, by the very function the workers
 * call ({@link computeDelay}); `none` waits nothing. One input object is
 * reused call after call, so a simulator's retry allocates nothing.
 */
export class RetryDelays {
  private readonly input: BackoffInput & { previousDelayMs: number | undefined };

  /** `policy` is {@link policyFor}'s for `strategy`. */
  constructor(
    private readonly strategy: SimStrategy,
    private readonly policy: RetryPolicy,
    random: Random,
  ) {
    this.input = { retry: 0, previousDelayMs: undefined, random };
  }

  /**
   * The delay before retry `retry` (0 for a client's first retry);
   * `previousDelayMs` is NaN when the client has not waited yet.
   */
  delay(retry: number, previousDelayMs: number): number {
    if (this.strategy === 'none') return 0;
    const input = this.input;
    input.retry = retry;
    input.previousDelayMs = Number.isNaN(previousDelayMs) ? undefined : previousDelayMs;
    return computeDelay(this.policy, input);
  }
}

/** The policy with `strategy` as its strategy (`none` keeps the policy's own). */
export function policyFor(policy: RetryPolicy, strategy: SimStrategy): RetryPolicy {
  return strategy === 'none' ? policy : { ...policy, strategy };
}

/**
 * A random stream for one strategy's trial, seeded from the run's seed, the
 * strategy's name and the trial: a strategy's figures do not depend on which
 * other strategies run beside it.
 */
export function streamRandom(
  seed: number,
  strategy: string,
  trial: number,
  stream: number,
): Random {
  const source = seededStream(seed, strategy, trial, stream);
  return () => source.next();
}

/** {@link streamRandom}'s stream as an object, for a hot loop (see {@link SeededStream}). */
export function seededStream(
  seed: number,
  strategy: string,
  trial: number,
  stream: number,
): SeededStream {
  // FNV-1a over the name, then mixed with the seed, trial and stream.
  let h = 0x811c9dc5;
  for (let i = 0; i < strategy.length; i++) {
    h ^= strategy.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= Math.imul(seed >>> 0, 0x9e3779b1);
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h ^= Math.imul(trial + 1, 0xc2b2ae35);
  h = Math.imul(h ^ (h >>> 13), 0x27d4eb2f);
  h ^= Math.imul(stream + 1, 0x165667b1);
  return new SeededStream((h ^ (h >>> 16)) >>> 0);
}
