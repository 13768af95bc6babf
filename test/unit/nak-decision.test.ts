import { describe, expect, it } from 'vitest';
import { parseRetryPolicy } from '../../src/policy/retry-policy.js';
import { decideNak } from '../../workers/nats/nak-decision.js';

const NOW = 1_800_000_000_000;
const policy = parseRetryPolicy({ strategy: 'fixed', baseMs: 500, capMs: 500, maxAttempts: 4 });
const transient = { class: 'Error', message: 'ECONNRESET', code: 'ECONNRESET' };
const base = {
  error: transient,
  publishedAt: NOW - 1000,
  maxDeliver: -1,
  policy,
  now: NOW,
  random: () => 0.5,
};

describe('JetStream nak mode: decideNak', () => {
  it("naks a transient failure with the policy's delay while deliveries remain", () => {
    expect(decideNak({ ...base, deliveries: 1 })).toMatchObject({ kind: 'retry', delayMs: 500 });
    expect(decideNak({ ...base, deliveries: 3 })).toMatchObject({ kind: 'retry', delayMs: 500 });
  });

  it('dead-letters when the deliveries use up maxAttempts', () => {
    expect(decideNak({ ...base, deliveries: 4 })).toEqual({
      kind: 'dead-letter',
      reason: 'max-attempts',
    });
  });

  it("dead-letters on the consumer's last max_deliver delivery, before JetStream drops it unseen", () => {
    expect(decideNak({ ...base, deliveries: 2, maxDeliver: 2 })).toEqual({
      kind: 'dead-letter',
      reason: 'max-attempts',
    });
  });

  it('dead-letters a permanent error at once, with its own reason', () => {
    const invalid = {
      class: 'PermanentError',
      message: 'body.n',
      deadReason: 'invalid-payload' as const,
    };
    expect(decideNak({ ...base, deliveries: 1, error: invalid })).toEqual({
      kind: 'dead-letter',
      reason: 'invalid-payload',
    });
    expect(
      decideNak({
        ...base,
        deliveries: 1,
        error: { class: 'HttpError', message: 'bad', status: 400 },
      }),
    ).toEqual({
      kind: 'dead-letter',
      reason: 'permanent-error',
    });
  });

  it("honours a server's Retry-After over the strategy", () => {
    const limited = { class: 'HttpError', message: 'slow down', status: 429, retryAfter: '3' };
    expect(decideNak({ ...base, deliveries: 1, error: limited })).toMatchObject({
      kind: 'retry',
      delayMs: 3000,
    });
  });
});
