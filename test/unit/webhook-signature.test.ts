import { createHmac, randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import {
  decodeSecret,
  secretProblem,
  signatureHeader,
  signWebhook,
  verifyWebhook,
  WebhookVerificationError,
} from '../../workers/webhook/signature.js';

/** The test vector of the Standard Webhooks reference libraries. */
const vector = {
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
};

/** 2021-02-25T15:02:10Z, the vector's own time. */
const vectorNow = vector.timestamp * 1000;

function newSecret(bytes = 32): string {
  return `whsec_${randomBytes(bytes).toString('base64')}`;
}

/** The spec's formula, computed here without the module under test. */
function independentSignature(secret: string, id: string, ts: number, body: string): string {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${ts}.${body}`).digest('base64')}`;
}

describe('signing', () => {
  it('reproduces the Standard Webhooks test vector', () => {
    expect(signatureHeader(vector.secret, vector.id, vector.timestamp, vector.body)).toBe(
      vector.signature,
    );
    // The vector is what node:crypto gives for the spec's formula, too.
    expect(independentSignature(vector.secret, vector.id, vector.timestamp, vector.body)).toBe(
      vector.signature,
    );
  });

  it('matches the formula computed independently, for random secrets and bodies', () => {
    for (let i = 0; i < 50; i += 1) {
      const secret = newSecret(24 + (i % 41));
      const body = JSON.stringify({ n: i, text: randomBytes(i).toString('hex'), ü: 'é' });
      const ts = 1_700_000_000 + i;
      expect(signatureHeader(secret, `evt_${i}`, ts, body)).toBe(
        independentSignature(secret, `evt_${i}`, ts, body),
      );
    }
  });

  it('gives the three headers, the timestamp in whole seconds', () => {
    const headers = signWebhook(vector.secret, vector.id, vector.timestamp, vector.body);
    expect(headers).toEqual({
      'webhook-id': vector.id,
      'webhook-timestamp': '1614265330',
      'webhook-signature': vector.signature,
    });
    expect(() => signWebhook(vector.secret, 'x', 1.5, '{}')).toThrow(RangeError);
  });

  it('signs with every secret during a rotation, space-separated, in order', () => {
    const old = newSecret();
    const current = newSecret();
    const header = signatureHeader([current, old], 'evt_1', 1_700_000_000, '{}');
    expect(header.split(' ')).toEqual([
      independentSignature(current, 'evt_1', 1_700_000_000, '{}'),
      independentSignature(old, 'evt_1', 1_700_000_000, '{}'),
    ]);
    expect(() => signatureHeader([], 'evt_1', 1, '{}')).toThrow(TypeError);
  });

  it("is the official standardwebhooks package's signature: its own verify() accepts each secret of a rotation", () => {
    const old = newSecret();
    const current = newSecret();
    const body = JSON.stringify({ type: 'invoice.paid', data: { id: 7 } });
    const headers = signWebhook([current, old], 'evt_7', Math.floor(Date.now() / 1000), body);
    for (const secret of [current, old]) {
      expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
    }
    expect(() => new Webhook(newSecret()).verify(body, headers)).toThrow(
      'No matching signature found',
    );
  });

  it('refuses a secret that is not base64, without quoting it', () => {
    const bad = 'whsec_not base64!!';
    expect(() => decodeSecret(bad)).toThrow(TypeError);
    try {
      decodeSecret(bad);
    } catch (err) {
      expect((err as Error).message).not.toContain('not base64!!');
    }
  });

  it.each([
    ['whsec_' + Buffer.alloc(24).toString('base64'), undefined],
    ['whsec_' + Buffer.alloc(64).toString('base64'), undefined],
    [vector.secret, undefined],
    [vector.secret.slice('whsec_'.length), 'must start with "whsec_"'],
    ['whsec_', 'must be "whsec_" followed by base64'],
    ['whsec_abc$', 'must be "whsec_" followed by base64'],
    ['whsec_' + Buffer.alloc(23).toString('base64'), 'must decode to 24–64 bytes, got 23'],
    ['whsec_' + Buffer.alloc(65).toString('base64'), 'must decode to 24–64 bytes, got 65'],
  ])('secretProblem(%j) is %j', (secret, problem) => {
    expect(secretProblem(secret)).toBe(problem);
  });
});

describe('verifyWebhook', () => {
  const vectorHeaders = {
    'webhook-id': vector.id,
    'webhook-timestamp': String(vector.timestamp),
    'webhook-signature': vector.signature,
  };

  it('accepts the test vector, with or without the whsec_ prefix', () => {
    expect(() =>
      verifyWebhook(vector.secret, vectorHeaders, vector.body, { now: vectorNow }),
    ).not.toThrow();
    expect(() =>
      verifyWebhook(vector.secret.slice(6), vectorHeaders, Buffer.from(vector.body), {
        now: vectorNow,
      }),
    ).not.toThrow();
  });

  it('round-trips what signWebhook produced, headers in any case or as a Headers object', () => {
    const secret = newSecret();
    const body = JSON.stringify({ type: 'invoice.paid', data: { id: 1 } });
    const signed = signWebhook(secret, 'evt_42', 1_700_000_000, body);
    const now = 1_700_000_000_000;
    expect(() => verifyWebhook(secret, signed, body, { now })).not.toThrow();
    const shouting = Object.fromEntries(
      Object.entries(signed).map(([k, v]) => [k.toUpperCase(), v]),
    );
    expect(() => verifyWebhook(secret, shouting, body, { now })).not.toThrow();
    expect(() => verifyWebhook(secret, new Headers(signed), body, { now })).not.toThrow();
  });

  it('accepts any one matching signature: a receiver holding either secret of a rotation', () => {
    const old = newSecret();
    const current = newSecret();
    const signed = signWebhook([current, old], 'evt_1', 1_700_000_000, '{}');
    const now = 1_700_000_000_000;
    expect(() => verifyWebhook(old, signed, '{}', { now })).not.toThrow();
    expect(() => verifyWebhook(current, signed, '{}', { now })).not.toThrow();
    // And a receiver mid-rotation holding both, against a sender still on the old one.
    const oldOnly = signWebhook(old, 'evt_1', 1_700_000_000, '{}');
    expect(() => verifyWebhook([current, old], oldOnly, '{}', { now })).not.toThrow();
    expect(() => verifyWebhook(newSecret(), signed, '{}', { now })).toThrow(
      'no webhook-signature matches',
    );
  });

  it('skips other schemes and malformed entries', () => {
    const header = `v1a,${randomBytes(64).toString('base64')} v2,${vector.signature.slice(3)} v1,short garbage ${vector.signature}`;
    expect(() =>
      verifyWebhook(vector.secret, { ...vectorHeaders, 'webhook-signature': header }, vector.body, {
        now: vectorNow,
      }),
    ).not.toThrow();
    // The right MAC under another scheme name is not a v1 signature.
    expect(() =>
      verifyWebhook(
        vector.secret,
        { ...vectorHeaders, 'webhook-signature': `v2,${vector.signature.slice(3)}` },
        vector.body,
        { now: vectorNow },
      ),
    ).toThrow(WebhookVerificationError);
  });

  it('refuses a tampered body, id or timestamp', () => {
    const opts = { now: vectorNow };
    expect(() => verifyWebhook(vector.secret, vectorHeaders, '{"test": 2432232315}', opts)).toThrow(
      'no webhook-signature matches',
    );
    expect(() =>
      verifyWebhook(
        vector.secret,
        { ...vectorHeaders, 'webhook-id': 'msg_other' },
        vector.body,
        opts,
      ),
    ).toThrow('no webhook-signature matches');
    expect(() =>
      verifyWebhook(
        vector.secret,
        { ...vectorHeaders, 'webhook-timestamp': String(vector.timestamp + 1) },
        vector.body,
        opts,
      ),
    ).toThrow('no webhook-signature matches');
  });

  it('holds the timestamp to the tolerance in both directions, boundary included', () => {
    const check = (offsetSec: number, toleranceSec?: number) => () =>
      verifyWebhook(vector.secret, vectorHeaders, vector.body, {
        now: vectorNow + offsetSec * 1000,
        ...(toleranceSec !== undefined ? { toleranceSec } : {}),
      });
    expect(check(300)).not.toThrow();
    expect(check(-300)).not.toThrow();
    expect(check(301)).toThrow('webhook-timestamp is 301 s old (tolerance 300 s)');
    expect(check(-301)).toThrow('webhook-timestamp is 301 s in the future (tolerance 300 s)');
    expect(check(11, 10)).toThrow(WebhookVerificationError);
    expect(check(10, 10)).not.toThrow();
  });

  it('names the missing headers and refuses a timestamp that is not whole seconds', () => {
    expect(() => verifyWebhook(vector.secret, {}, vector.body, { now: vectorNow })).toThrow(
      'missing header: webhook-id, webhook-timestamp, webhook-signature',
    );
    expect(() =>
      verifyWebhook(
        vector.secret,
        { ...vectorHeaders, 'webhook-timestamp': '1614265330.5' },
        vector.body,
        { now: vectorNow },
      ),
    ).toThrow('not a whole number of seconds');
  });

  it('never quotes the secret or the signature in its errors', () => {
    const secret = newSecret();
    const signed = signWebhook(secret, 'evt_1', 1_700_000_000, '{}');
    const failures = [
      () => verifyWebhook(secret, signed, '{"x":1}', { now: 1_700_000_000_000 }),
      () => verifyWebhook(secret, signed, '{}', { now: 1_800_000_000_000 }),
    ];
    for (const fail of failures) {
      try {
        fail();
        expect.unreachable();
      } catch (err) {
        const message = (err as Error).message;
        expect(message).not.toContain(secret.slice(6, 20));
        expect(message).not.toContain(signed['webhook-signature'].slice(3, 20));
      }
    }
  });
});
