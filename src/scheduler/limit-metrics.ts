import { Gauge, type Registry } from 'prom-client';
import type { LimitStore } from '../redis/limit-store.js';

/** Keys given their own series per queue, those with the most in flight. */
export const limitTopKeys = 10;
/** Keys one scrape reads to choose them. */
const scanned = 1_000;

/** What one scrape reads of a queue's adaptive limits. */
export interface LimitReading {
  /** Keys with state. */
  keys: number;
  /** The top keys by attempts in flight: limit (null at its initial value) and in flight. */
  top: { key: string; limit: number | null; inFlight: number }[];
}

/** Reads only (ZCARD, ZREVRANGE, HMGET, ZCOUNT, TIME). */
export async function readLimits(store: LimitStore): Promise<LimitReading> {
  const [keys, views] = await Promise.all([store.count(), store.list(scanned)]);
  const top = views
    .sort((a, b) => b.inFlight - a.inFlight || (a.limit ?? Infinity) - (b.limit ?? Infinity))
    .slice(0, limitTopKeys)
    .map(({ key, limit, inFlight }) => ({ key, limit, inFlight }));
  return { keys, top };
}

/**
 * The adaptive-concurrency gauges: the number of keys with state per queue,
 * and the learned limit and fleet-wide in-flight attempts of at most
 * {@link limitTopKeys} keys per queue (those with the most in flight), so a
 * queue with 100,000 keys still has 21 series.
 */
export function registerLimitGauges(
  registers: Registry[],
  read: () => Promise<Map<string, { limits?: LimitReading }>>,
): void {
  new Gauge({
    name: 'requeue_adaptive_keys',
    help: 'Keys with adaptive-concurrency state (a learned limit or leases in flight)',
    labelNames: ['queue'],
    registers,
    async collect() {
      const readings = await read();
      this.reset();
      for (const [queue, r] of readings) if (r.limits) this.set({ queue }, r.limits.keys);
    },
  });
  new Gauge({
    name: 'requeue_adaptive_limit',
    help: `The fleet's learned concurrency limit of a key (the ${limitTopKeys} keys with the most in flight per queue)`,
    labelNames: ['queue', 'key'],
    registers,
    async collect() {
      const readings = await read();
      this.reset();
      for (const [queue, r] of readings)
        for (const k of r.limits?.top ?? [])
          if (k.limit !== null) this.set({ queue, key: k.key }, Math.floor(k.limit));
    },
  });
  new Gauge({
    name: 'requeue_adaptive_in_flight',
    help: `Attempts of a key in flight across the fleet (the ${limitTopKeys} keys with the most per queue)`,
    labelNames: ['queue', 'key'],
    registers,
    async collect() {
      const readings = await read();
      this.reset();
      for (const [queue, r] of readings)
        for (const k of r.limits?.top ?? []) this.set({ queue, key: k.key }, k.inFlight);
    },
  });
}
