import { describe, expect, it } from 'vitest';
import {
  addToWindow,
  bucketStart,
  emptyWindow,
  formatGeometry,
  geometryFor,
  isLive,
  parseGeometry,
  parseWindowHash,
  windowSums,
} from '../../src/policy/window.js';

/** The reference time of these tests: a bucket boundary for every geometry below. */
const T0 = Date.UTC(2025, 0, 1, 12, 0, 0);

const g = geometryFor(10_000, 10);

describe('window geometry', () => {
  it('cuts a window into whole buckets of at least 1 ms', () => {
    expect(geometryFor(10_000, 10)).toEqual({ bucketMs: 1_000, buckets: 10 });
    expect(geometryFor(10_001, 10)).toEqual({ bucketMs: 1_000, buckets: 10 });
    expect(geometryFor(5, 10)).toEqual({ bucketMs: 1, buckets: 10 });
  });

  it('is stored as <bucketMs>:<buckets> and read back; anything else reads as none', () => {
    expect(formatGeometry(g)).toBe('1000:10');
    expect(parseGeometry('1000:10')).toEqual(g);
    for (const bad of [undefined, '', '1000', '0:10', '1000:0', '-1:10', '1e3:10'])
      expect(parseGeometry(bad)).toBeUndefined();
  });

  it('keys buckets by absolute start time; a bucket lives for `buckets` buckets', () => {
    expect(bucketStart(T0 + 1_999, g)).toBe(T0 + 1_000);
    expect(isLive(T0, T0 + 9_999, g)).toBe(true);
    expect(isLive(T0, T0 + 10_000, g)).toBe(false);
    // A bucket from the future (a failover to a Redis whose clock is behind) still counts.
    expect(isLive(T0 + 60_000, T0, g)).toBe(true);
  });
});

describe('window sums', () => {
  it('sums live counters by letter with the stored geometry, whatever the reader’s options', () => {
    const hash = parseWindowHash({
      g: '1000:10',
      [`${T0}:t`]: '4',
      [`${T0}:f`]: '1',
      [`${T0 + 9_000}:t`]: '2',
      [`${T0 - 1_000}:t`]: '100',
      cf: '3',
    });
    expect(hash.other).toEqual({ cf: '3' });
    expect(windowSums(hash, T0 + 9_500)).toEqual({ t: 6, f: 1 });
    expect(windowSums(hash, T0 + 10_000)).toEqual({ t: 2 });
  });

  it('a window without a geometry (an older version’s) sums to nothing', () => {
    expect(windowSums(parseWindowHash({ '1735732800:t': '5' }), T0)).toEqual({});
  });
});

describe('addToWindow', () => {
  it('gives a new window the proposed geometry with its first counter only', () => {
    expect(addToWindow(emptyWindow, T0, g, {})).toEqual(emptyWindow);
    const w = addToWindow(emptyWindow, T0 + 1_500, g, { t: 2, f: 0 });
    expect(w).toEqual({ geometry: g, counters: { [`${T0 + 1_000}:t`]: 2 }, other: {} });
  });

  it('keeps the stored geometry against a writer with other options', () => {
    const w = addToWindow(emptyWindow, T0, g, { t: 1 });
    const other = addToWindow(w, T0 + 500, geometryFor(60_000, 6), { t: 1 });
    expect(other.geometry).toEqual(g);
    expect(other.counters).toEqual({ [`${T0}:t`]: 2 });
  });

  it('drops counters that left the window, and all of those it cannot place', () => {
    const w = addToWindow(emptyWindow, T0, g, { t: 1 });
    expect(addToWindow(w, T0 + 10_000, g, { t: 1 }).counters).toEqual({ [`${T0 + 10_000}:t`]: 1 });
    const legacy = parseWindowHash({ '1735732800:t': '5', cf: '1' });
    expect(addToWindow(legacy, T0, g, {})).toEqual({
      geometry: undefined,
      counters: {},
      other: { cf: '1' },
    });
  });

  it('returns a new window and leaves the one given alone', () => {
    const w = addToWindow(emptyWindow, T0, g, { t: 1 });
    const copy = structuredClone(w);
    addToWindow(w, T0, g, { t: 5 });
    expect(w).toEqual(copy);
  });
});
