import { describe, expect, it } from 'vitest';
import { queueAndId, queueOf } from '../../src/cli/commands/endpoint-args.js';
import { isResendError, ResendError } from '../../src/errors/resend-error.js';
import { endpointIdSchema } from '../../src/policy/endpoint-record.js';
import { matchesFilter, metaTags, parseRef } from '../../src/scheduler/dlq/dead-record.js';
import { recoverLane } from '../../workers/webhook/recovery.js';
import { resendJobKey, webhookJobKey } from '../../workers/webhook/webhook-job.js';

/** Issue 24, item 5's pure parts: the endpoint filter of a recovery, the keys and lanes it makes, the CLI's two forms. */

const death = { reason: 'max-attempts', message: 'x', attempts: 3, deadAt: 1_000 } as const;

describe('a recovery selects its endpoint’s deaths by tag', () => {
  it('matches every tag asked for, and nothing without tags', () => {
    const record = { name: 'invoice.paid', tags: { endpoint: 'acme', resend: '1' } };
    expect(matchesFilter(record, death, { tags: { endpoint: 'acme' } })).toBe(true);
    expect(matchesFilter(record, death, { tags: { endpoint: 'acme', resend: '1' } })).toBe(true);
    expect(matchesFilter(record, death, { tags: { endpoint: 'other' } })).toBe(false);
    expect(matchesFilter({ name: 'invoice.paid' }, death, { tags: { endpoint: 'acme' } })).toBe(
      false,
    );
    expect(matchesFilter(record, death, { tags: { endpoint: 'acme' }, since: 1_001 })).toBe(false);
  });

  it('reads tags from stored options, ignoring what is not a string tag', () => {
    expect(metaTags('{"rq":{"tags":{"endpoint":"acme","n":3}}}')).toEqual({ endpoint: 'acme' });
    for (const hostile of [undefined, null, '', 'not json', '{"rq":5}', '{"rq":{"tags":[1]}}'])
      expect(metaTags(hostile)).toBeUndefined();
    const ref = parseRef('id-1', [
      'n',
      'g1',
      JSON.stringify(death),
      '{"rq":{"tags":{"endpoint":"e"}}}',
    ]);
    expect(ref?.tags).toEqual({ endpoint: 'e' });
  });
});

describe('the keys a resend and a recovery make', () => {
  const job = {
    endpoint: { id: 'acme', url: 'https://a.example' },
    event: { id: 'msg/1', type: 't', payload: 1 },
  };

  it('a resend’s key cannot be another message’s key (message ids have no ".")', () => {
    expect(resendJobKey(job, 2)).toBe('acme/msg/1.resend-2');
    expect(resendJobKey(job, 2)).not.toBe(webhookJobKey(job));
  });

  it('the recovery lane cannot be an endpoint’s own dispatch key (endpoint ids have no "/")', () => {
    expect(recoverLane('acme')).toBe('recover/acme');
    expect(endpointIdSchema.safeParse(recoverLane('acme')).success).toBe(false);
  });
});

describe('the CLI’s <queue> <id> and <id> --queue', () => {
  it('reads either form, defaults the queue to webhooks, refuses a clash naming --queue', () => {
    expect(queueAndId('q1', 'ep', undefined)).toEqual({ queue: 'q1', id: 'ep' });
    expect(queueAndId('ep', undefined, 'q2')).toEqual({ queue: 'q2', id: 'ep' });
    expect(queueAndId('ep', undefined, undefined)).toEqual({ queue: 'webhooks', id: 'ep' });
    expect(queueAndId('q1', 'ep', 'q1')).toEqual({ queue: 'q1', id: 'ep' });
    expect(() => queueAndId('q1', 'ep', 'q2')).toThrow(
      /^--queue: "q2" and the positional queue "q1" differ/,
    );
    expect(() => queueAndId('q1', ' ', undefined, 'endpointId')).toThrow(
      /^<endpointId>: must not be empty$/,
    );
    expect(queueOf(undefined, undefined)).toBe('webhooks');
    expect(queueOf('a', 'a')).toBe('a');
    expect(() => queueOf('a', 'b')).toThrow(/--queue/);
  });
});

describe('ResendError', () => {
  it('is recognised by name across boundaries, and a hostile value is not one', () => {
    const err = new ResendError('no', 'not-found');
    expect(isResendError(err)).toBe(true);
    expect(isResendError({ name: 'ResendError' })).toBe(true);
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    expect(isResendError(proxy)).toBe(false);
    expect(isResendError(new Error('no'))).toBe(false);
  });
});
