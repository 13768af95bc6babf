/**
 * `analyse` reads whatever a handler threw for the failure decision
 * (`src/policy/classify/analyse.ts`, moved out of the attempt runner): it
 * never throws, whatever was thrown.
 */
import { describe, expect, it } from 'vitest';
import { PermanentError } from '../../src/errors/permanent-error.js';
import { analyse } from '../../src/policy/classify/analyse.js';
import { defaultClassifyOptions } from '../../src/policy/classify/index.js';

const NOW = Date.UTC(2026, 0, 1);

describe('analyse', () => {
  it('describes, classifies and gives the dead reason of a PermanentError', () => {
    const failure = analyse(
      new PermanentError('bad input', { deadReason: 'invalid-payload' }),
      defaultClassifyOptions,
      NOW,
    );
    expect(failure.error).toMatchObject({ class: 'PermanentError', message: 'bad input' });
    expect(failure.classification.kind).toBe('permanent');
    expect(failure.deadReason).toBe('invalid-payload');
  });

  it('reads a 503 as a retry, with no dead reason', () => {
    const failure = analyse(
      Object.assign(new Error('unavailable'), { status: 503 }),
      defaultClassifyOptions,
      NOW,
    );
    expect(failure.classification.kind).toBe('retry');
    expect(failure.deadReason).toBeUndefined();
  });

  it.each([
    ['a revoked proxy', revokedProxy()],
    ['undefined', undefined],
    ['a string', 'plain text'],
    ['an object whose every read throws', throwingObject()],
  ])('never throws on %s', (_, thrown) => {
    const failure = analyse(thrown, defaultClassifyOptions, NOW);
    expect(typeof failure.error.message).toBe('string');
    expect(['retry', 'permanent']).toContain(failure.classification.kind);
  });
});

function revokedProxy(): object {
  const { proxy, revoke } = Proxy.revocable({}, {});
  revoke();
  return proxy;
}

function throwingObject(): object {
  return new Proxy(
    {},
    {
      get() {
        throw new Error('no reading me');
      },
      getPrototypeOf() {
        throw new Error('no reading me');
      },
      has() {
        throw new Error('no reading me');
      },
    },
  );
}
