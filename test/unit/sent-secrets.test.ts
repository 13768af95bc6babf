import { describe, expect, it } from 'vitest';
import { collectSentSecrets } from '../../workers/webhook/sent-secrets.js';

/**
 * The scrubber of what a delivery sent (issue 21, part 3): every credential
 * the request carried, in every form an echo may give it back in, is blanked;
 * what is not a credential stays.
 */

const signingSecret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

const sent = collectSentSecrets({
  url: new URL('https://ada:p%40ss-w0rd@hooks.example/in?token=t%2Bk%2Fn&page=2&sig=abcd1234'),
  headers: {
    'user-agent': 'requeue-webhooks/0.1',
    'content-type': 'application/json',
    'x-api-key': 'ak"quoted\\key',
    cookie: 'session=ck-session-value; theme=dark-mode',
    'x-partner-token': 'partner-value-42',
    'x-custom-cred': 'custom-credential-7',
    authorization: 'Bearer bearer-value.xyz',
    'webhook-id': 'evt_123456',
    'webhook-signature': 'v1,c2lnbmF0dXJlLXZhbHVlLWJhc2U2NA==',
  },
  secret: signingSecret,
  secretHeaders: ['x-custom-cred'],
});

/** Each credential and the forms an echo gives it back in. */
const credentials = [
  'p@ss-w0rd',
  'p%40ss-w0rd',
  Buffer.from('ada:p@ss-w0rd').toString('base64'),
  't+k/n',
  't%2Bk%2Fn',
  'abcd1234',
  'ak"quoted\\key',
  'ck-session-value',
  'partner-value-42',
  'custom-credential-7',
  'bearer-value.xyz',
  'c2lnbmF0dXJlLXZhbHVlLWJhc2U2NA==',
  signingSecret,
  signingSecret.replace('whsec_', ''),
];

const forms = (value: string): string[] => [
  value,
  JSON.stringify(value).slice(1, -1),
  JSON.stringify(JSON.stringify(value)).slice(1, -1),
  encodeURIComponent(value),
  Buffer.from(value).toString('base64'),
];

describe('what a delivery sent stays out of what it keeps', () => {
  it('every credential, in every echoed form, is blanked from a body', () => {
    for (const value of credentials) {
      for (const form of forms(value)) {
        const echoed = `{"echo":"before ${form} after"}`;
        const scrubbed = sent.scrub(echoed);
        expect(scrubbed, `${value} as ${form}`).not.toContain(form);
        expect(scrubbed).toContain('[redacted]');
        expect(scrubbed).toMatch(/^\{"echo":"before .*after"\}$/);
      }
    }
  });

  it('a Basic header sent by a job is blanked whole, decoded, and by its password', () => {
    const basic = collectSentSecrets({
      url: new URL('https://hooks.example/in'),
      headers: { authorization: `Basic ${Buffer.from('carol:bp-secret-9').toString('base64')}` },
      secret: undefined,
    });
    for (const text of [
      Buffer.from('carol:bp-secret-9').toString('base64'),
      'carol:bp-secret-9',
      'pw=bp-secret-9',
    ])
      expect(basic.scrub(text)).not.toMatch(/bp-secret-9|Y2Fyb2w6YnAtc2VjcmV0LTk=/);
  });

  // (Every value of the Cookie header counts: the header is secret as a whole.)
  it('what is not a credential is left as it was', () => {
    const text =
      'POST /in?page=2 user-agent requeue-webhooks/0.1 content-type application/json evt_123456 ada';
    expect(sent.scrub(text)).toBe(text);
  });

  it('an error, its stack, its body and its cause are scrubbed in place', () => {
    const cause = new Error('socket said bearer-value.xyz');
    const err = Object.assign(new Error('answered 400: {"k":"partner-value-42"}', { cause }), {
      body: 'ck-session-value',
    });
    expect(sent.scrubError(err)).toBe(err);
    expect(err.message).toBe('answered 400: {"k":"[redacted]"}');
    expect(err.stack).not.toContain('partner-value-42');
    expect(err.body).toBe('[redacted]');
    expect(cause.message).toBe('socket said [redacted]');
  });

  it('reads far enough past a cut for the longest form of a secret', () => {
    expect(sent.longest).toBeGreaterThanOrEqual(
      Math.max(...credentials.flatMap(forms).map((f) => Buffer.byteLength(f))),
    );
  });
});
