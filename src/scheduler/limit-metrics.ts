import { Gauge, type Registry } from 'prom-client';
import type { LimitStore } from '../redis/limit-store.js';

/** Keys one scrape reads (those touched last); the index's size is counted whole. */
const scanned = 1_000;

/** What one scrape reads of a queue's adaptive limits. */
export interface LimitReading {
  /** Keys with state. */
  keys: number;
  /** Keys whose learned limit is below `initial` (overload or a 429 held them back). */
  limited: number;
  /** Attempts in flight under the limits, every key read. */
  inFlight: number;
  /** The lowest learned limit (admitted at once), if a key has one. */
  lowest: number | undefined;
}

/** Reads only (ZCARD, ZREVRANGE, HMGET, ZCOUNT, TIME). */
export async function readLimits(limits: {
  store: LimitStore;
  params: { initial: number };
}): Promise<LimitReading> {
  const [keys, views] = await Promise.all([limits.store.count(), limits.store.list(scanned)]);
  let limited = 0;
  let inFlight = 0;
  let lowest: number | undefined;
  for (const v of views) {
    inFlight += v.inFlight;
    if (v.limit === null) continue;
    if (v.limit < limits.params.initial) limited += 1;
    lowest = Math.min(lowest ?? Infinity, Math.floor(v.limit));
  }
  return { keys, limited, inFlight, lowest };
}

/**
 * The adaptive-concurrency gauges, per queue and never per key (a key is a
 * customer's endpoint or tenant: no key in a label, and the series stay
 * bounded however many keys there are). Per key: `requeue limits <queue>`,
 * the admin API, the dashboard.
 */
export function registerLimitGauges(
  registers: Registry[],
  read: () => Promise<Map<string, { limits?: LimitReading }>>,
): void {
  const gauge = (name: string, help: string, value: (r: LimitReading) => number | undefined) =>
    new Gauge({
      name,
      help,
      labelNames: ['queue'],
      registers,
      async collect() {
        const readings = await read();
        this.reset();
        for (const [queue, r] of readings) {
          const v = r.limits ? value(r.limits) : undefined;
          if (v !== undefined) this.set({ queue }, v);
        }
      },
    });
  gauge(
    'requeue_adaptive_keys',
    'Keys with adaptive-concurrency state (a learned limit or leases in flight)',
    (r) => r.keys,
  );
  gauge(
    'requeue_adaptive_limited_keys',
    'Keys whose learned concurrency limit is below its initial value (held back by overload or a 429)',
    (r) => r.limited,
  );
  gauge(
    'requeue_adaptive_in_flight',
    'Attempts in flight under adaptive limits across the fleet, all keys',
    (r) => r.inFlight,
  );
  gauge(
    'requeue_adaptive_limit_min',
    'The lowest learned concurrency limit among the keys that have one',
    (r) => r.lowest,
  );
}
