import { ConfigError } from '../../errors/config-error.js';
import type { RetryPolicy } from '../../policy/retry-policy.js';
import { standardNormal } from '../../util/random.js';
import type { Random } from '../../util/system.js';
import type { SimStrategy } from '../sim-strategy.js';
import { seed004Strategies, type OutageParams } from './parameters.js';

/**
 * The delay before a retry by seed 004's client (smira/exponential-backoff,
 * client.go:72–89), exactly: with `-exponential-backoff`,
 * `min(lastDelay · factor, cap) + normal(0, 1) · jitter · 1 s` (client.go:77–81:
 * the jitter is absolute, ±100 ms at 0.1, not a fraction of the delay),
 * else the simple delay (`baseMs`, the seed's 100 ms). `lastDelayMs` is the
 * client's previous sleep, whatever it was: `lastDelay = delay` runs before
 * every sleep (client.go:88), so the first retry's chain starts from the
 * think gap before the failed request (mean 10 s, so ≈ 27 s on average),
 * not from 100 ms. The result may be negative (Go's `time.After` then fires
 * at once); the caller sleeps `max(0, delay)` and keeps the raw value as
 * the next `lastDelayMs`.
 */
export function seed004Delay(
  strategy: SimStrategy,
  policy: RetryPolicy,
  lastDelayMs: number,
  random: Random,
): number {
  if (strategy !== 'exponential') return policy.baseMs;
  const delay = Math.min(lastDelayMs * policy.factor, policy.capMs);
  return delay + standardNormal(random) * policy.jitter * 1000;
}

/** Refuses a strategy seed 004's client does not have. */
export function checkOutageClient(params: OutageParams, strategies: readonly SimStrategy[]): void {
  if (params.client !== 'seed004') return;
  const other = strategies.find((s) => !(seed004Strategies as readonly string[]).includes(s));
  if (other !== undefined)
    throw new ConfigError(
      `client: seed004's client retries by ${seed004Strategies.join(' or ')} only, got strategy "${other}"`,
    );
}
