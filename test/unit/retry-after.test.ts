import { describe, expect, it } from 'vitest';
import { parseRetryAfter, readRetryAfterHeader } from '../../src/policy/classify/retry-after.js';

/** The reference time every case is measured from: 2026-01-01T00:00:00Z, a Thursday. */
const NOW = Date.UTC(2026, 0, 1);
const SECOND = 1000;
const DAY = 86_400 * SECOND;

describe('parseRetryAfter', () => {
  it.each<[unknown, number]>([
    ['0', 0],
    ['120', 120 * SECOND],
    ['  120  ', 120 * SECOND],
    ['\t5\t', 5 * SECOND],
    ['007', 7 * SECOND],
    [0, 0],
    [120, 120 * SECOND],
  ])('reads delta-seconds %j', (value, expected) => {
    expect(parseRetryAfter(value, NOW)).toBe(expected);
  });

  // An epoch timestamp is delta-seconds by the grammar, so it is clamped rather than read as a date.
  it.each(['99999999999999999999', '2147483649', '1767225610000', 2 ** 40])(
    'clamps huge delta-seconds %j to 2^31 s (RFC 9111 §1.2.2)',
    (value) => {
      expect(parseRetryAfter(value, NOW)).toBe(2 ** 31 * SECOND);
    },
  );

  it.each<[string, string, number]>([
    ['IMF-fixdate', 'Thu, 01 Jan 2026 00:02:00 GMT', 120 * SECOND],
    ['IMF-fixdate, any case', 'thu, 01 JAN 2026 00:02:00 gmt', 120 * SECOND],
    ['IMF-fixdate with surrounding whitespace', '  Thu, 01 Jan 2026 00:00:01 GMT ', SECOND],
    ['IMF-fixdate, a day later', 'Fri, 02 Jan 2026 00:00:00 GMT', DAY],
    ['RFC 850', 'Thursday, 01-Jan-26 00:00:30 GMT', 30 * SECOND],
    ['asctime, one-digit day (read as UTC)', 'Thu Jan  1 00:00:45 2026', 45 * SECOND],
    ['asctime, two-digit day', 'Sat Jan 10 00:00:00 2026', 9 * DAY],
    [
      'RFC 850, year 50 years ahead stays ahead',
      'Wednesday, 01-Jan-76 00:00:00 GMT',
      Date.UTC(2076, 0, 1) - NOW,
    ],
    ['a leap second', 'Thu, 01 Jan 2026 00:00:60 GMT', 60 * SECOND],
    ['exactly now', 'Thu, 01 Jan 2026 00:00:00 GMT', 0],
  ])('reads a future HTTP-date: %s', (_label, value, expected) => {
    expect(parseRetryAfter(value, NOW)).toBe(expected);
  });

  it.each([
    'Sun, 06 Nov 1994 08:49:37 GMT',
    'Sunday, 06-Nov-94 08:49:37 GMT',
    'Sun Nov  6 08:49:37 1994',
    // RFC 9110 §5.6.7: more than 50 years ahead means the century before.
    'Friday, 01-Jan-77 00:00:00 GMT',
    'Wed, 31 Dec 2025 23:59:59 GMT',
  ])('gives 0 for an HTTP-date in the past: %j', (value) => {
    expect(parseRetryAfter(value, NOW)).toBe(0);
  });

  it.each<unknown>([
    'abc',
    '-5',
    '1.5',
    '+5',
    '1e3',
    '0x10',
    '',
    '   ',
    '120 s',
    'Wed, 99 Foo 2015',
    'Thu, 31 Feb 2026 00:00:00 GMT',
    'Thu, 01 Jan 2026 24:00:00 GMT',
    'Thu, 01 Jan 2026 00:00:00 UTC',
    'Thu, 1 Jan 2026 00:00:00 GMT',
    '2026-01-01T00:00:10Z',
    -1,
    1.5,
    Number.NaN,
    Number.POSITIVE_INFINITY,
    null,
    undefined,
    true,
    ['120'],
    {},
  ])('treats %j as garbage', (value) => {
    expect(parseRetryAfter(value, NOW)).toBeUndefined();
  });

  it('needs a finite now to resolve a date, but not a delta', () => {
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:02:00 GMT', Number.NaN)).toBeUndefined();
    expect(parseRetryAfter('120', Number.NaN)).toBe(120 * SECOND);
  });
});

describe('readRetryAfterHeader', () => {
  const shapes: [string, unknown, unknown][] = [
    ['a Headers object', new Headers({ 'Retry-After': '120' }), '120'],
    ['a plain object, retry-after', { 'retry-after': '120' }, '120'],
    ['a plain object, Retry-After', { 'Retry-After': '120' }, '120'],
    ['a plain object, RETRY-AFTER', { 'RETRY-AFTER': '120' }, '120'],
    ['a plain object, array value', { 'retry-after': ['120', '60'] }, '120'],
    ['a plain object, number value', { 'retry-after': 120 }, 120],
    ['a Map', new Map([['Retry-After', '120']]), '120'],
    ['a Map, array value', new Map([['retry-after', ['120', '60']]]), '120'],
    ['a get() that returns an array', { get: () => ['120', '60'] }, '120'],
  ];

  it.each(shapes)('reads err.headers as %s', (_label, headers, expected) => {
    expect(readRetryAfterHeader({ headers })).toEqual(expected);
  });

  it.each(shapes)('reads err.response.headers as %s', (_label, headers, expected) => {
    expect(readRetryAfterHeader({ response: { headers } })).toEqual(expected);
  });

  it('falls back to response.headers when err.headers has none', () => {
    const err = {
      headers: { 'content-type': 'text/plain' },
      response: { headers: { 'retry-after': '7' } },
    };
    expect(readRetryAfterHeader(err)).toBe('7');
  });

  it('prefers err.headers over response.headers', () => {
    const err = { headers: { 'retry-after': '1' }, response: { headers: { 'retry-after': '2' } } };
    expect(readRetryAfterHeader(err)).toBe('1');
  });

  const { proxy: revoked, revoke } = Proxy.revocable({}, {});
  revoke();

  it.each<[string, unknown]>([
    ['no headers', new Error('x')],
    ['null headers', { headers: null }],
    ['headers as a string', { headers: 'retry-after: 5' }],
    ['a Headers object without it', { headers: new Headers({ 'content-type': 'text/plain' }) }],
    ['a plain object without it', { headers: { 'content-type': 'text/plain' } }],
    ['an empty Map', { headers: new Map() }],
    ['an empty array value', { headers: { 'retry-after': [] } }],
    ['a thrown string', 'boom'],
    ['null', null],
    ['undefined', undefined],
    [
      'a get() that throws',
      {
        headers: {
          get: () => {
            throw new Error('hostile');
          },
        },
      },
    ],
    ['revoked Proxy headers', { headers: revoked }],
    ['a revoked Proxy', revoked],
  ])('gives undefined for %s, without throwing', (_label, err) => {
    expect(readRetryAfterHeader(err)).toBeUndefined();
  });
});
