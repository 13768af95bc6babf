import { UnrecoverableError } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { PermanentError } from '../../src/errors/permanent-error.js';
import { RetryableError } from '../../src/errors/retryable-error.js';
import {
  classifyError,
  parseClassifyOptions,
  type RetryClassification,
} from '../../src/policy/classify/index.js';
import { classify, errorWith } from './classify-helpers.js';

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
