import { describe, expect, it, vi } from 'vitest';
import { ConfigError } from '../../src/config/env.js';
import { PermanentError } from '../../src/errors/permanent-error.js';
import { RetryableError } from '../../src/errors/retryable-error.js';
import {
  defaultClassifyOptions,
  parseClassifyOptions,
  type ClassifyOptionsInput,
} from '../../src/policy/classify/index.js';
import { classify, errorWith, revokedProxy } from './classify-helpers.js';

/**
 * classifyError's options and fallbacks: the predicate, Retry-After, errors it
 * does not know, and parseClassifyOptions (what an error says of itself is in
 * `classify.test.ts`).
 */

describe('classifyError: predicate', () => {
  it('retries when the predicate returns true, whatever the error', () => {
    const predicate = vi.fn(() => true);
    const err = errorWith({ status: 404 });
    expect(classify(err, { predicate })).toEqual({
      kind: 'retry',
      reason: 'predicate',
      status: 404,
      timeout: false,
    });
    expect(predicate).toHaveBeenCalledWith(err);
  });

  it.each<[string, unknown]>([
    ['a retryable status', errorWith({ status: 503 })],
    ['a RetryableError', new RetryableError('x')],
    ['a network error', errorWith({ code: 'ECONNRESET' })],
  ])('gives up when the predicate returns false, on %s', (_label, err) => {
    expect(classify(err, { predicate: () => false })).toMatchObject({
      kind: 'permanent',
      reason: 'predicate',
    });
  });

  it.each<[string, unknown, string, string]>([
    ['a retryable status', errorWith({ status: 503 }), 'retry', 'http-status'],
    ['a permanent status', errorWith({ status: 400 }), 'permanent', 'http-status'],
    ['a PermanentError', new PermanentError('x'), 'permanent', 'permanent-error'],
    ['a thrown string', 'boom', 'retry', 'unknown-error'],
  ])('falls through on undefined, for %s', (_label, err, kind, reason) => {
    expect(classify(err, { predicate: () => undefined })).toMatchObject({ kind, reason });
  });

  it('attaches Retry-After to a predicate retry', () => {
    const err = errorWith({ status: 400, headers: { 'retry-after': '5' } });
    expect(classify(err, { predicate: () => true })).toMatchObject({ retryAfterMs: 5000 });
  });

  it('lets an exception from the predicate propagate', () => {
    const predicate = () => {
      throw new Error('predicate bug');
    };
    expect(() => classify(new Error('x'), { predicate })).toThrow('predicate bug');
  });
});

describe('classifyError: Retry-After', () => {
  const headerShapes: [string, unknown][] = [
    ['a Headers object', new Headers({ 'Retry-After': '120' })],
    ['retry-after', { 'retry-after': '120' }],
    ['Retry-After', { 'Retry-After': '120' }],
    ['RETRY-AFTER', { 'RETRY-AFTER': '120' }],
    ['an array value', { 'retry-after': ['120', '5'] }],
    ['a number value', { 'retry-after': 120 }],
    ['a Map', new Map([['Retry-After', '120']])],
  ];

  it.each(headerShapes)('reads err.headers as %s', (_label, headers) => {
    expect(classify(errorWith({ status: 429, headers }))).toMatchObject({
      kind: 'retry',
      retryAfterMs: 120_000,
    });
  });

  it.each(headerShapes)('reads err.response.headers as %s', (_label, headers) => {
    expect(classify(errorWith({ response: { status: 503, headers } }))).toMatchObject({
      kind: 'retry',
      retryAfterMs: 120_000,
    });
  });

  it.each<[string, string, ClassifyOptionsInput, number]>([
    ['a date in the future, exactly', 'Thu, 01 Jan 2026 00:00:42 GMT', {}, 42_000],
    ['a date in the past, as 0', 'Sun, 06 Nov 1994 08:49:37 GMT', {}, 0],
    ['zero seconds', '0', {}, 0],
    ['10 minutes, capped at the default 5', '600', {}, 300_000],
    ['a far date, capped', 'Fri, 01 Jan 2027 00:00:00 GMT', {}, 300_000],
    ['huge delta-seconds, capped', '99999999999999999999', {}, 300_000],
    ['10 s, capped by a custom maxRetryAfterMs', '10', { maxRetryAfterMs: 1000 }, 1000],
    ['10 s, with maxRetryAfterMs 0', '10', { maxRetryAfterMs: 0 }, 0],
  ])('reads %s', (_label, value, options, retryAfterMs) => {
    const err = errorWith({ status: 503, headers: { 'retry-after': value } });
    expect(classify(err, options)).toMatchObject({ kind: 'retry', retryAfterMs });
  });

  it.each(['abc', '-5', '1.5', '', '   ', 'Wed, 99 Foo 2015'])(
    'ignores a malformed %j',
    (value) => {
      const result = classify(errorWith({ status: 503, headers: { 'retry-after': value } }));
      expect(result).toEqual({ kind: 'retry', reason: 'http-status', status: 503, timeout: false });
    },
  );

  it.each<[string, unknown]>([
    ['a network error', errorWith({ code: 'ECONNRESET', headers: { 'retry-after': '3' } })],
    ['an unknown error', errorWith({ headers: { 'retry-after': '3' } })],
    [
      'an abort',
      Object.assign(new DOMException('x', 'AbortError'), { headers: { 'retry-after': '3' } }),
    ],
  ])('applies to any retry: %s', (_label, err) => {
    expect(classify(err)).toMatchObject({ kind: 'retry', retryAfterMs: 3000 });
  });

  it('is not attached to a permanent verdict', () => {
    const err = errorWith({ status: 404, headers: { 'retry-after': '3' } });
    expect(classify(err)).toEqual({ kind: 'permanent', reason: 'http-status', status: 404 });
  });
});

describe('classifyError: unknown errors', () => {
  const unknowns: [string, unknown][] = [
    ['a plain Error', new Error('x')],
    ['a TypeError', new TypeError('x')],
    ['a thrown string', 'boom'],
    ['null', null],
    ['undefined', undefined],
    ['a number', 42],
    ['a bigint', 10n],
    ['a symbol', Symbol('s')],
    ['an empty object', {}],
    ['an object with a message', { message: 'x' }],
    ['a revoked Proxy', revokedProxy()],
    [
      'an object whose getters throw',
      Object.defineProperties(
        {},
        {
          name: {
            get: () => {
              throw new Error('getter');
            },
          },
          status: {
            get: () => {
              throw new Error('getter');
            },
          },
          headers: {
            get: () => {
              throw new Error('getter');
            },
          },
        },
      ),
    ],
  ];

  it.each(unknowns)('retries %s by default', (_label, err) => {
    expect(classify(err)).toEqual({ kind: 'retry', reason: 'unknown-error', timeout: false });
  });

  it.each(unknowns)("gives up on %s with unknownErrors: 'permanent'", (_label, err) => {
    expect(classify(err, { unknownErrors: 'permanent' })).toEqual({
      kind: 'permanent',
      reason: 'unknown-error',
    });
  });
});

describe('parseClassifyOptions', () => {
  it('fills in the defaults', () => {
    expect(parseClassifyOptions({})).toEqual({
      retryableStatuses: [408, 425, 429, 500, 502, 503, 504],
      goneStatuses: [410],
      retryableCodes: [],
      unknownErrors: 'retry',
      maxRetryAfterMs: 300_000,
    });
    expect(defaultClassifyOptions).toEqual(parseClassifyOptions({}));
  });

  it('freezes the defaults so no caller can change them for everyone', () => {
    expect(Object.isFrozen(defaultClassifyOptions)).toBe(true);
    expect(Object.isFrozen(defaultClassifyOptions.retryableStatuses)).toBe(true);
  });

  it('keeps the defaults a caller does not override, and passes the predicate through', () => {
    const predicate = () => undefined;
    const options = parseClassifyOptions({ unknownErrors: 'permanent', predicate });
    expect(options.unknownErrors).toBe('permanent');
    expect(options.maxRetryAfterMs).toBe(300_000);
    expect(options.predicate).toBe(predicate);
  });

  it.each<[unknown, string]>([
    [{ maxRetryAfterMs: -1 }, 'classify.maxRetryAfterMs'],
    [{ maxRetryAfterMs: 1.5 }, 'classify.maxRetryAfterMs'],
    [{ maxRetryAfterMs: '300000' }, 'classify.maxRetryAfterMs'],
    [{ retryableStatuses: [99] }, 'classify.retryableStatuses.0'],
    [{ retryableStatuses: [503, 600] }, 'classify.retryableStatuses.1'],
    [{ retryableStatuses: '503' }, 'classify.retryableStatuses'],
    [{ goneStatuses: [410.5] }, 'classify.goneStatuses.0'],
    [{ goneStatuses: [429] }, 'classify.goneStatuses: 429 is also in retryableStatuses'],
    [{ retryableCodes: [''] }, 'classify.retryableCodes.0'],
    [{ retryableCodes: 'ENOTFOUND' }, 'classify.retryableCodes'],
    [{ unknownErrors: 'maybe' }, 'classify.unknownErrors'],
    [{ predicate: 'yes' }, 'classify.predicate: must be a function'],
    [{ maxRetryAfter: 1000 }, 'classify: unknown key "maxRetryAfter"'],
    [null, 'classify'],
  ])('rejects %j, naming %s', (input, field) => {
    expect(() => parseClassifyOptions(input)).toThrow(ConfigError);
    expect(() => parseClassifyOptions(input)).toThrow(field);
  });
});
