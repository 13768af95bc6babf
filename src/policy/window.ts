/**
 * The sliding windows shared by a fleet (the breaker's outcomes, the ratio
 * budget's requests and retries), as pure bucket arithmetic. Redis keeps a
 * window in one hash; the Lua writers (`src/redis/lua/includes/window.lua`)
 * and these functions must agree, and a property test holds them to it.
 *
 * The hash's fields:
 * - `g`: the geometry, `<bucketMs>:<buckets>`, written by the first writer;
 * - `<startMs>:<letter>`: a counter of the bucket that starts at `startMs`
 *   (absolute ms since the epoch, a multiple of `bucketMs`), e.g. `1732…000:f`;
 * - anything else (the breaker's `cf`) is kept as it is.
 *
 * Buckets are keyed by absolute start time and the geometry travels with the
 * window, so every reader and writer agrees on what a field means whatever
 * options it was started with. The rule when options differ: **the stored
 * geometry wins while the hash lives.** A writer with other options adds to
 * and prunes by the stored geometry, never its own, so it cannot delete
 * another's live buckets; a reader needs no options at all. The hash expires
 * one bucket after its window goes quiet (or is deleted by a reset), and the
 * next writer's geometry then takes over: a changed `windowMs` or `buckets`
 * takes effect after a quiet window or a reset (`requeue breaker close`).
 *
 * Times are Redis's `TIME` (one clock for the fleet), passed in here as `nowMs`.
 */

/** How a window is cut into buckets. */
export interface WindowGeometry {
  /** Each bucket's length, ≥ 1. */
  readonly bucketMs: number;
  /** How many buckets make the window, ≥ 1. */
  readonly buckets: number;
}

/** A window as stored: its geometry (absent on a new window) and its fields. */
export interface WindowHash {
  readonly geometry: WindowGeometry | undefined;
  /** Bucket counters by field name, `<startMs>:<letter>` → count. */
  readonly counters: Readonly<Record<string, number>>;
  /** Fields that are neither `g` nor a bucket counter, as stored. */
  readonly other: Readonly<Record<string, string>>;
}

/** The name of the geometry field. */
export const geometryField = 'g';

const counterField = /^(-?\d+):([a-z])$/;

/** The geometry a writer proposes for a window of `windowMs` in `buckets` buckets. */
export function geometryFor(windowMs: number, buckets: number): WindowGeometry {
  const n = Math.max(1, Math.floor(buckets));
  return { bucketMs: Math.max(1, Math.floor(windowMs / n)), buckets: n };
}

/** The window's real length: whole buckets only. */
export function windowLengthMs(geometry: WindowGeometry): number {
  return geometry.bucketMs * geometry.buckets;
}

/** The stored form of a geometry (the `g` field's value). */
export function formatGeometry(geometry: WindowGeometry): string {
  return `${geometry.bucketMs}:${geometry.buckets}`;
}

/** Parses a `g` value; `undefined` when absent or unreadable. */
export function parseGeometry(raw: string | undefined): WindowGeometry | undefined {
  const match = raw === undefined ? null : /^(\d+):(\d+)$/.exec(raw);
  if (!match) return undefined;
  const bucketMs = Number(match[1]);
  const buckets = Number(match[2]);
  return bucketMs >= 1 && buckets >= 1 ? { bucketMs, buckets } : undefined;
}

/** The start of the bucket that holds `nowMs`. */
export function bucketStart(nowMs: number, geometry: WindowGeometry): number {
  return Math.floor(nowMs / geometry.bucketMs) * geometry.bucketMs;
}

/**
 * Whether the bucket starting at `startMs` is still in the window at
 * `nowMs`: it is one of the `buckets` buckets ending with the current one.
 * A bucket from the future (a Redis failover to a host whose clock is behind)
 * stays counted: losing failures would hide an outage.
 */
export function isLive(startMs: number, nowMs: number, geometry: WindowGeometry): boolean {
  return startMs > bucketStart(nowMs, geometry) - windowLengthMs(geometry);
}

/** Splits a hash as HGETALL returns it into geometry, counters and other fields. */
export function parseWindowHash(fields: Readonly<Record<string, string>>): WindowHash {
  const counters: Record<string, number> = {};
  const other: Record<string, string> = {};
  for (const [name, value] of Object.entries(fields)) {
    if (name === geometryField) continue;
    if (counterField.test(name)) counters[name] = Number(value);
    else other[name] = value;
  }
  return { geometry: parseGeometry(fields[geometryField]), counters, other };
}

/**
 * The window's sums by letter at `nowMs`, over live buckets only. A window
 * without a geometry (none written yet, or left by a version that did not
 * store one) sums to nothing: its buckets cannot be placed in time.
 */
export function windowSums(window: WindowHash, nowMs: number): Record<string, number> {
  const sums: Record<string, number> = {};
  const { geometry } = window;
  if (!geometry) return sums;
  for (const [name, value] of Object.entries(window.counters)) {
    const [, start, letter] = counterField.exec(name)!;
    if (isLive(Number(start), nowMs, geometry)) sums[letter!] = (sums[letter!] ?? 0) + value;
  }
  return sums;
}

/**
 * What a writer does, as the Lua does it: adopts the stored geometry (or
 * proposes its own on a new window), drops counters that left the window
 * (all of them when the window had no geometry: they cannot be placed), and
 * adds `add` to the current bucket. Returns a new window; counts of 0 add no
 * field, and a window gets its geometry with its first counter.
 */
export function addToWindow(
  window: WindowHash,
  nowMs: number,
  proposed: WindowGeometry,
  add: Readonly<Record<string, number>>,
): WindowHash {
  const adding = Object.values(add).some((count) => count !== 0);
  // A window is born with its first counter: a write that adds nothing leaves no geometry.
  const geometry = window.geometry ?? (adding ? proposed : undefined);
  const counters: Record<string, number> = {};
  if (!geometry) return { geometry, counters, other: window.other };
  if (window.geometry) {
    for (const [name, value] of Object.entries(window.counters)) {
      const start = Number(counterField.exec(name)![1]);
      if (isLive(start, nowMs, geometry)) counters[name] = value;
    }
  }
  const start = bucketStart(nowMs, geometry);
  for (const [letter, count] of Object.entries(add)) {
    if (count === 0) continue;
    const name = `${start}:${letter}`;
    counters[name] = (counters[name] ?? 0) + count;
  }
  return { geometry, counters, other: window.other };
}

/**
 * The window without `letter`'s counters and without the `other` fields
 * named in `forget`, as the breaker's close from half-open leaves it
 * (`breakerCas`, mode 2: failures and failures in a row forgotten, the jobs
 * counted kept).
 */
export function dropCounters(
  window: WindowHash,
  letter: string,
  forget: readonly string[] = [],
): WindowHash {
  const counters = Object.fromEntries(
    Object.entries(window.counters).filter(([name]) => !name.endsWith(`:${letter}`)),
  );
  const other = Object.fromEntries(
    Object.entries(window.other).filter(([name]) => !forget.includes(name)),
  );
  return { geometry: window.geometry, counters, other };
}

/** A window with nothing in it yet. */
export const emptyWindow: WindowHash = Object.freeze({
  geometry: undefined,
  counters: Object.freeze({}),
  other: Object.freeze({}),
});
