import { UnrecoverableError } from 'bullmq';
import { describe, expect, it, vi } from 'vitest';
import { ConfigError } from '../../src/config/env.js';
import { PermanentError } from '../../src/errors/permanent-error.js';
import { RetryableError } from '../../src/errors/retryable-error.js';
import {
  classifyError,
  defaultClassifyOptions,
  describeError,
  parseClassifyOptions,
  type ClassifyOptionsInput,
  type RetryClassification,
} from '../../src/policy/classify/index.js';

/** The reference time every case is measured from: 2026-01-01T00:00:00Z. */
const NOW = Date.UTC(2026, 0, 1);

/** Classifies with the defaults overridden by `options`. */
function classify(err: unknown, options: ClassifyOptionsInput = {}) {
  return classifyError(err, parseClassifyOptions(options), NOW);
}

/** An Error carrying extra fields, as HTTP clients and Node's net throw them. */
function errorWith(fields: Record<string, unknown>, message = 'failed'): Error {
  return Object.assign(new Error(message), fields);
}

function revokedProxy(): object {
  const { proxy, revoke } = Proxy.revocable({}, {});
  revoke();
  return proxy;
}

describe('classifyError: HTTP status', () => {
  it.each([408, 425, 429, 500, 502, 503, 504])('retries %i', (status) => {
    expect(classify(errorWith({ status }))).toEqual({
      kind: 'retry',
      reason: 'http-status',
      status,
      timeout: status === 408,
    });
  });

  it.each([400, 401, 403, 404, 409, 422, 418, 451, 501, 505, 599])('gives up on %i', (status) => {
    expect(classify(errorWith({ status }))).toEqual({
      kind: 'permanent',
      reason: 'http-status',
      status,
    });
  });

  it('gives up on 410 as gone', () => {
    expect(classify(errorWith({ status: 410 }))).toEqual({
      kind: 'permanent',
      reason: 'gone',
      status: 410,
    });
  });

  it.each<[string, unknown, 'retry' | 'permanent', number]>([
    ['status', { status: 503 }, 'retry', 503],
    ['statusCode', { statusCode: 503 }, 'retry', 503],
    ['response.status', { response: { status: 503 } }, 'retry', 503],
    ['response.statusCode (got)', { response: { statusCode: 404 } }, 'permanent', 404],
    ['status as a string', { status: '503' }, 'retry', 503],
    ['statusCode as a padded string', { statusCode: ' 404 ' }, 'permanent', 404],
    ['response.status as a string', { response: { status: '410' } }, 'permanent', 410],
    ['a bad status, then a good statusCode', { status: 'n/a', statusCode: 429 }, 'retry', 429],
    ['a plain object, not an Error', { status: 500 }, 'retry', 500],
  ])('reads %s', (_label, fields, kind, status) => {
    const result = classify(errorWith(fields as Record<string, unknown>));
    expect(result.kind).toBe(kind);
    expect(result.status).toBe(status);
  });

  it.each<[string, unknown, number | undefined]>([
    ['1xx', 102, 102],
    ['2xx', 200, 200],
    ['3xx', 302, 302],
    ['below 100', 99, undefined],
    ['above 599', 600, undefined],
    ['a fraction', 503.5, undefined],
    ['a non-numeric string', 'abc', undefined],
    ['a four-digit string', '5030', undefined],
  ])('ignores a status that is %s', (_label, status, seen) => {
    expect(classify(errorWith({ status }))).toEqual({
      kind: 'retry',
      reason: 'unknown-error',
      ...(seen !== undefined && { status: seen }),
      timeout: false,
    });
  });

  it('uses the configured status sets', () => {
    const options = { retryableStatuses: [503], goneStatuses: [404, 410] };
    expect(classify(errorWith({ status: 500 }), options)).toMatchObject({
      kind: 'permanent',
      reason: 'http-status',
    });
    expect(classify(errorWith({ status: 404 }), options)).toMatchObject({
      kind: 'permanent',
      reason: 'gone',
    });
    expect(classify(errorWith({ status: 503 }), options)).toMatchObject({ kind: 'retry' });
  });
});

describe('classifyError: network errors', () => {
  const codes: [string, boolean][] = [
    ['ECONNRESET', false],
    ['ECONNREFUSED', false],
    ['ECONNABORTED', false],
    ['EPIPE', false],
    ['EAI_AGAIN', false],
    ['EHOSTUNREACH', false],
    ['ENETUNREACH', false],
    ['UND_ERR_SOCKET', false],
    ['UND_ERR_CLOSED', false],
    ['ETIMEDOUT', true],
    ['UND_ERR_CONNECT_TIMEOUT', true],
    ['UND_ERR_HEADERS_TIMEOUT', true],
    ['UND_ERR_BODY_TIMEOUT', true],
  ];
  const expected = (code: string, timeout: boolean) => ({
    kind: 'retry',
    reason: timeout ? 'timeout' : 'network',
    code,
    timeout,
  });

  it.each(codes)('retries %s on the error', (code, timeout) => {
    expect(classify(errorWith({ code }))).toEqual(expected(code, timeout));
  });

  it.each(codes)("retries %s on the error's cause (undici's fetch failed)", (code, timeout) => {
    const err = new TypeError('fetch failed', { cause: errorWith({ code }) });
    expect(classify(err)).toEqual(expected(code, timeout));
  });

  it('prefers a known code on the cause to an unknown one on the error', () => {
    const err = errorWith({ code: 'ERR_WRAPPED', cause: errorWith({ code: 'ECONNRESET' }) });
    expect(classify(err)).toMatchObject({ reason: 'network', code: 'ECONNRESET' });
  });

  it.each([
    'DEPTH_ZERO_SELF_SIGNED_CERT',
    'SELF_SIGNED_CERT_IN_CHAIN',
    'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
    'CERT_HAS_EXPIRED',
    'ERR_TLS_CERT_ALTNAME_INVALID',
  ])(
    'retries a TLS certificate refusal (%s) as its own reason, on the error or its cause',
    (code) => {
      const verdict = { kind: 'retry', reason: 'tls-certificate', code, timeout: false };
      expect(classify(errorWith({ code }))).toEqual(verdict);
      expect(classify(new Error('POST failed', { cause: errorWith({ code }) }))).toEqual(verdict);
    },
  );

  it('names the TLS code even when permanent unknown errors are asked for (a certificate gets fixed)', () => {
    const options = parseClassifyOptions({ unknownErrors: 'permanent' });
    const err = errorWith({ code: 'CERT_HAS_EXPIRED' });
    expect(classifyError(err, options, 0)).toMatchObject({
      kind: 'retry',
      reason: 'tls-certificate',
    });
  });

  it('leaves ENOTFOUND to unknownErrors unless listed in retryableCodes', () => {
    const err = errorWith({ code: 'ENOTFOUND' });
    expect(classify(err)).toEqual({
      kind: 'retry',
      reason: 'unknown-error',
      code: 'ENOTFOUND',
      timeout: false,
    });
    expect(classify(err, { unknownErrors: 'permanent' })).toEqual({
      kind: 'permanent',
      reason: 'unknown-error',
      code: 'ENOTFOUND',
    });
    expect(classify(err, { retryableCodes: ['ENOTFOUND'] })).toEqual(expected('ENOTFOUND', false));
  });

  it('lets an HTTP status win over a network code', () => {
    expect(classify(errorWith({ status: 404, code: 'ECONNRESET' }))).toMatchObject({
      kind: 'permanent',
      reason: 'http-status',
    });
  });
});

describe('classifyError: aborts and timeouts', () => {
  const timeout = { kind: 'retry', reason: 'timeout', timeout: true };

  it.each<[string, unknown]>([
    ['a DOMException AbortError', new DOMException('x', 'AbortError')],
    ['a DOMException TimeoutError', new DOMException('x', 'TimeoutError')],
    ['AbortSignal.abort()’s reason', AbortSignal.abort().reason],
    ['a plain object named AbortError', { name: 'AbortError', message: 'x' }],
    ['an Error named TimeoutError', Object.assign(new Error('x'), { name: 'TimeoutError' })],
    ['an AbortError as cause', new Error('x', { cause: new DOMException('x', 'AbortError') })],
    ['a TimeoutError as cause', new Error('x', { cause: new DOMException('x', 'TimeoutError') })],
  ])('retries %s as a timeout', (_label, err) => {
    expect(classify(err)).toEqual(timeout);
  });

  it('retries the reason of a fired AbortSignal.timeout() as a timeout', async () => {
    const signal = AbortSignal.timeout(1);
    await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
    expect((signal.reason as Error).name).toBe('TimeoutError');
    expect(classify(signal.reason)).toEqual(timeout);
  });
});

describe('classifyError: PermanentError and RetryableError', () => {
  it.each<[string, unknown]>([
    ['a PermanentError', new PermanentError('x')],
    ['one that crossed a process boundary', { name: 'PermanentError', message: 'x' }],
    ['one carrying a retryable status', Object.assign(new PermanentError('x'), { status: 503 })],
    [
      'one wrapping a network error',
      new PermanentError('x', { cause: errorWith({ code: 'EPIPE' }) }),
    ],
  ])('gives up on %s', (_label, err) => {
    expect(classify(err)).toMatchObject({ kind: 'permanent', reason: 'permanent-error' });
  });

  it.each<[string, unknown, number | undefined]>([
    ['a RetryableError', new RetryableError('x'), undefined],
    ['one with retryAfterMs', new RetryableError('x', { retryAfterMs: 1500 }), 1500],
    ['one that crossed a process boundary', { name: 'RetryableError', retryAfterMs: 2000 }, 2000],
    [
      'one carrying a permanent status',
      Object.assign(new RetryableError('x'), { status: 400 }),
      undefined,
    ],
    [
      'one with a fractional retryAfterMs, rounded up',
      new RetryableError('x', { retryAfterMs: 1.2 }),
      2,
    ],
    [
      'one asking for longer than the cap',
      new RetryableError('x', { retryAfterMs: 3_600_000 }),
      300_000,
    ],
    ['one with a negative retryAfterMs', new RetryableError('x', { retryAfterMs: -5 }), undefined],
    ['one with NaN retryAfterMs', new RetryableError('x', { retryAfterMs: Number.NaN }), undefined],
    ['one with a string retryAfterMs', { name: 'RetryableError', retryAfterMs: '2000' }, undefined],
  ])('retries %s', (_label, err, retryAfterMs) => {
    const result = classify(err);
    expect(result).toMatchObject({ kind: 'retry', reason: 'retryable-error' });
    expect((result as RetryClassification).retryAfterMs).toBe(retryAfterMs);
  });

  it.each<[string, unknown]>([
    ["BullMQ's UnrecoverableError", new UnrecoverableError('the partner refused the payload')],
    [
      'one carrying a retryable status',
      Object.assign(new UnrecoverableError('x'), { status: 503 }),
    ],
    ['one that crossed a process boundary', { name: 'UnrecoverableError', message: 'x' }],
  ])('retried %s as an unknown error: now gives up at once', (_label, err) => {
    expect(classify(err)).toMatchObject({ kind: 'permanent', reason: 'unrecoverable-error' });
  });

  it('prefers its own retryAfterMs to a Retry-After header', () => {
    const err = Object.assign(new RetryableError('x', { retryAfterMs: 1000 }), {
      headers: { 'retry-after': '60' },
    });
    expect(classify(err)).toMatchObject({ retryAfterMs: 1000 });
  });

  it('falls back to the header when its own retryAfterMs is unusable', () => {
    const err = { name: 'RetryableError', retryAfterMs: 'soon', headers: { 'retry-after': '60' } };
    expect(classify(err)).toMatchObject({ retryAfterMs: 60_000 });
  });
});

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

describe('describeError', () => {
  class Widget {
    size = 3;
  }
  const circular: Record<string, unknown> = { a: 1 };
  circular.self = circular;

  it.each<[string, unknown, ReturnType<typeof describeError>]>([
    ['an Error', new Error('boom'), { class: 'Error', message: 'boom' }],
    ['a TypeError', new TypeError('bad'), { class: 'TypeError', message: 'bad' }],
    ['a PermanentError', new PermanentError('no'), { class: 'PermanentError', message: 'no' }],
    ['a DOMException', new DOMException('x', 'AbortError'), { class: 'AbortError', message: 'x' }],
    [
      'an Error with status and code',
      errorWith({ status: '503', code: 'E_UPSTREAM' }),
      { class: 'Error', message: 'failed', status: 503, code: 'E_UPSTREAM' },
    ],
    [
      'an Error with a code on its cause',
      new TypeError('fetch failed', { cause: errorWith({ code: 'UND_ERR_SOCKET' }) }),
      { class: 'TypeError', message: 'fetch failed', code: 'UND_ERR_SOCKET' },
    ],
    ['a thrown string', 'boom', { class: 'string', message: 'boom' }],
    ['null', null, { class: 'null', message: '' }],
    ['undefined', undefined, { class: 'undefined', message: '' }],
    ['a number', 42, { class: 'number', message: '42' }],
    ['a bigint', 10n, { class: 'bigint', message: '10' }],
    ['a boolean', false, { class: 'boolean', message: 'false' }],
    ['a symbol', Symbol('s'), { class: 'symbol', message: 'Symbol(s)' }],
    ['a plain object', { a: 1 }, { class: 'Object', message: '{"a":1}' }],
    ['a class instance', new Widget(), { class: 'Widget', message: '{"size":3}' }],
    [
      'a prototype-less object',
      Object.assign(Object.create(null), { a: 1 }),
      { class: 'Object', message: '{"a":1}' },
    ],
    ['a circular object', circular, { class: 'Object', message: '{"a":1,"self":"[Circular]"}' }],
    ['an object holding a bigint', { n: 1n }, { class: 'Object', message: '{"n":"1n"}' }],
    ['a revoked Proxy', revokedProxy(), { class: 'Object', message: '[unserialisable]' }],
    [
      'an object whose getters throw',
      Object.defineProperty({}, 'message', {
        enumerable: true,
        get: () => {
          throw new Error('getter');
        },
      }),
      { class: 'Object', message: '[unserialisable]' },
    ],
    [
      'an object whose toJSON throws',
      {
        toJSON: () => {
          throw new Error('toJSON');
        },
      },
      { class: 'Object', message: '[unserialisable]' },
    ],
  ])('summarises %s', (_label, err, expected) => {
    expect(describeError(err)).toStrictEqual(expected);
  });

  it.each<[string, number, string]>([
    ['x'.repeat(600), 500, `${'x'.repeat(499)}…`],
    ['x'.repeat(500), 500, 'x'.repeat(500)],
    ['abcdefghijkl', 10, 'abcdefghi…'],
    // Cutting between the halves of an emoji would leave a lone surrogate.
    ['😀😀😀😀', 4, '😀…'],
    ['abc', 0, ''],
  ])('truncates %j to %i characters', (message, max, expected) => {
    expect(describeError(new Error(message), max).message).toBe(expected);
    expect(describeError(message, max).message).toBe(expected);
  });
});
