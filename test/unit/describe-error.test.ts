import { describe, expect, it } from 'vitest';
import { PermanentError } from '../../src/errors/permanent-error.js';
import { describeError } from '../../src/policy/classify/index.js';
import { errorWith, revokedProxy } from './classify-helpers.js';

/**
 * describeError: the short, secret-free description of whatever a handler threw
 * (its stack is in `describe-error-stack.test.ts`).
 */

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
