import { describe, expect, it } from 'vitest';
import { stackOf } from '../../src/policy/classify/describe-error.js';

describe('stackOf: the stack a failed attempt keeps', () => {
  it('keeps where it was thrown, without the credentials a message carried', () => {
    const err = new Error('GET https://deploy:s3cr3t-pw@api.example.com/v1?token=abc123 failed');
    const stack = stackOf(err)!;
    expect(stack).toMatch(/^Error: GET https:\/\/.*api\.example\.com/);
    expect(stack).toMatch(/describe-error-stack\.test\.ts/);
    expect(stack).not.toContain('s3cr3t-pw');
    expect(stack).not.toContain('abc123');
  });

  it('is cut to 4,000 characters, and absent for what has no string stack', () => {
    const long = new Error('x'.repeat(10_000));
    expect(stackOf(long)!.length).toBeLessThanOrEqual(4_000);
    expect(stackOf('a thrown string')).toBeUndefined();
    expect(stackOf({ stack: 42 })).toBeUndefined();
    const hostile = new Proxy(
      {},
      {
        get() {
          throw new Error('no');
        },
      },
    );
    expect(stackOf(hostile)).toBeUndefined();
  });
});
