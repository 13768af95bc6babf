import { describe, expect, it } from 'vitest';
import { isPermanentError, PermanentError } from '../../src/errors/permanent-error.js';
import { isRetryableError, RetryableError } from '../../src/errors/retryable-error.js';
import { ConfigError, isConfigError } from '../../src/errors/config-error.js';
import {
  AttemptTimeoutError,
  isAttemptTimeoutError,
} from '../../src/errors/attempt-timeout-error.js';

/** A Proxy whose every trap throws, as a revoked one does. */
function revokedProxy(): object {
  const { proxy, revoke } = Proxy.revocable({}, {});
  revoke();
  return proxy;
}

const throwingName = {
  get name(): string {
    throw new Error('getter');
  },
};

describe('PermanentError', () => {
  it('is an Error with its name and message', () => {
    const err = new PermanentError('bad input');
    expect(err).toBeInstanceOf(Error);
    expect(err.name).toBe('PermanentError');
    expect(err.message).toBe('bad input');
    expect('cause' in err).toBe(false);
  });

  it('passes cause through to Error', () => {
    const cause = new Error('root');
    expect(new PermanentError('x', { cause }).cause).toBe(cause);
  });
});

describe('RetryableError', () => {
  it('is an Error with its name, message and retryAfterMs', () => {
    const err = new RetryableError('rate limited', { retryAfterMs: 1500 });
    expect(err).toBeInstanceOf(Error);
    expect(err.name).toBe('RetryableError');
    expect(err.message).toBe('rate limited');
    expect(err.retryAfterMs).toBe(1500);
    expect('cause' in err).toBe(false);
  });

  it('passes cause through to Error and leaves retryAfterMs unset by default', () => {
    const cause = new Error('root');
    const err = new RetryableError('x', { cause });
    expect(err.cause).toBe(cause);
    expect(err.retryAfterMs).toBeUndefined();
  });
});

describe('isPermanentError and isRetryableError', () => {
  class QuotaError extends RetryableError {}

  it.each<[string, unknown, boolean, boolean]>([
    ['a PermanentError', new PermanentError('x'), true, false],
    ['a RetryableError', new RetryableError('x'), false, true],
    ['a subclass, by instanceof', new QuotaError('x'), false, true],
    ['a plain object named PermanentError', { name: 'PermanentError', message: 'x' }, true, false],
    [
      'a plain object named RetryableError',
      { name: 'RetryableError', retryAfterMs: 5 },
      false,
      true,
    ],
    [
      'a PermanentError after a JSON round trip',
      JSON.parse(JSON.stringify(new PermanentError('x'))),
      true,
      false,
    ],
    [
      'a RetryableError after a JSON round trip',
      JSON.parse(JSON.stringify(new RetryableError('x', { retryAfterMs: 5 }))),
      false,
      true,
    ],
    ['a plain Error', new Error('x'), false, false],
    ['an object with another name', { name: 'TypeError' }, false, false],
    ['the name as a thrown string', 'PermanentError', false, false],
    ['null', null, false, false],
    ['undefined', undefined, false, false],
    ['a number', 42, false, false],
    ['a revoked Proxy', revokedProxy(), false, false],
    ['an object whose name getter throws', throwingName, false, false],
  ])('%s', (_label, value, permanent, retryable) => {
    expect(isPermanentError(value)).toBe(permanent);
    expect(isRetryableError(value)).toBe(retryable);
  });
});

describe('ConfigError and AttemptTimeoutError', () => {
  it.each([
    ['ConfigError', (m: string, o?: { cause?: unknown }) => new ConfigError(m, o)],
    ['TimeoutError', (m: string, o?: { cause?: unknown }) => new AttemptTimeoutError(m, o)],
  ] as const)('%s: an Error with its name and message, cause passed through', (name, make) => {
    const err = make('x: must be a number');
    expect(err).toBeInstanceOf(Error);
    expect(err.name).toBe(name);
    expect(err.message).toBe('x: must be a number');
    expect('cause' in err).toBe(false);
    const cause = new Error('root');
    expect(make('x', { cause }).cause).toBe(cause);
  });

  it.each<[string, unknown, boolean, boolean]>([
    ['a ConfigError', new ConfigError('x'), true, false],
    ['an AttemptTimeoutError', new AttemptTimeoutError('x'), false, true],
    [
      'a ConfigError after a JSON round trip',
      JSON.parse(JSON.stringify(new ConfigError('x'))),
      true,
      false,
    ],
    ['a plain object named TimeoutError', { name: 'TimeoutError' }, false, true],
    ['a plain Error', new Error('x'), false, false],
    ['the name as a thrown string', 'ConfigError', false, false],
    ['null', null, false, false],
    ['a revoked Proxy', revokedProxy(), false, false],
    ['an object whose name getter throws', throwingName, false, false],
  ])('the guards on %s', (_label, value, config, timeout) => {
    expect(isConfigError(value)).toBe(config);
    expect(isAttemptTimeoutError(value)).toBe(timeout);
  });
});
