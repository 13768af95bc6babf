import { performance } from 'node:perf_hooks';
import { bestOffset, type ClockOffset, type ClockSample } from '../policy/clock-offset.js';
import type { Clock } from '../util/system.js';
import type { RedisClient } from './connection.js';

/**
 * Redis's clock minus `clock`, from `samples` readings of `TIME` (a read),
 * on the quickest round trip (`src/policy/clock-offset.ts`). Rejects when
 * Redis does not answer.
 */
export async function measureClockOffset(
  redis: RedisClient,
  clock: Clock,
  samples = 5,
): Promise<ClockOffset> {
  const readings: ClockSample[] = [];
  for (let i = 0; i < samples; i += 1) {
    const sentAt = clock.now();
    const sent = performance.now();
    const [seconds = NaN, micros = NaN] = await redis.time();
    readings.push({ sentAt, roundTripMs: performance.now() - sent, redisTime: [seconds, micros] });
  }
  return bestOffset(readings);
}
