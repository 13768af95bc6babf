import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { PermanentError } from '../../src/errors/permanent-error.js';
import { classifyError, parseClassifyOptions } from '../../src/policy/classify/classify.js';
import { captureBrokerError, reviveBrokerError } from '../../workers/consumer/broker-error.js';
import { messageDedupeKey, retryQueueNameFor } from '../../workers/consumer/dedupe-key.js';
import { decodeBody, sanitizeHeaders } from '../../workers/consumer/message-body.js';
import { defaultRetryQueueName } from '../../workers/stream/retry-job.js';

describe('consumer core', () => {
  it('uses the message id when there is one, and a hash of body + properties otherwise', () => {
    const body = Buffer.from('{"a":1}');
    expect(messageDedupeKey({ id: 'm-1', body })).toBe('id:m-1');
    const a = messageDedupeKey({ body, properties: { contentType: 'x', headers: { b: 1, a: 2 } } });
    const b = messageDedupeKey({ body, properties: { headers: { a: 2, b: 1 }, contentType: 'x' } });
    expect(a).toBe(b);
    expect(a).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(messageDedupeKey({ body: Buffer.from('{"a":2}') })).not.toBe(messageDedupeKey({ body }));
    // An id too long for a key is hashed, not cut (two ids sharing a prefix stay apart).
    const long = 'x'.repeat(300);
    expect(messageDedupeKey({ id: long, body })).not.toBe(
      messageDedupeKey({ id: `${long}y`, body }),
    );
  });

  it('a flat, sorted set of properties (serialised without a replacer) hashes as before', () => {
    const body = Buffer.from('{"a":1}');
    const byHand = `sha256:${createHash('sha256').update('{"a":1,"b":"x"}\0').update(body).digest('hex')}`;
    expect(messageDedupeKey({ body, properties: { a: 1, b: 'x' } })).toBe(byHand);
    expect(messageDedupeKey({ body, properties: { b: 'x', a: 1 } })).toBe(byHand);
    expect(messageDedupeKey({ body, properties: () => ({ a: 1, b: 'x' }) })).toBe(byHand);
    // Integer-like keys come first in an object's own order: the sorting path still handles them.
    expect(messageDedupeKey({ body, properties: { '9': 1, '10': 2 } })).toBe(
      messageDedupeKey({ body, properties: { '10': 2, '9': 1 } }),
    );
    // The properties of a message with a usable id are never made.
    expect(
      messageDedupeKey({
        id: 'm-1',
        body,
        properties: () => {
          throw new Error('made');
        },
      }),
    ).toBe('id:m-1');
  });

  it('names retry queues as the stream consumer always has', () => {
    expect(defaultRetryQueueName('orders', 'billing')).toBe('orders.billing.retry');
    expect(retryQueueNameFor(['a.b:c{d}%'])).toBe('a%2Eb%3Ac%7Bd%7D%25.retry');
  });

  it('revives a broker error that the classifier reads as the original', () => {
    const permanent = new PermanentError('bad order', { deadReason: 'invalid-payload' });
    const revived = reviveBrokerError(captureBrokerError(permanent));
    expect(classifyError(revived, parseClassifyOptions({}), 0)).toEqual(
      classifyError(permanent, parseClassifyOptions({}), 0),
    );
    expect((revived as Error & { deadReason?: string }).deadReason).toBe('invalid-payload');
  });

  it('decodes JSON, text and binary bodies without throwing', () => {
    expect(decodeBody(Buffer.from('{"n":1}'))).toEqual({ n: 1 });
    expect(decodeBody(Buffer.from('plain text'))).toBe('plain text');
    expect(decodeBody(Buffer.from([0xff, 0xfe, 0x00, 0x80]))).toBeUndefined();
    // A view into a larger buffer decodes its own bytes only.
    expect(decodeBody(new Uint8Array(Buffer.from('xx{"n":2}yy')).subarray(2, 9))).toEqual({ n: 2 });
  });

  it('keeps hostile headers harmless', () => {
    const hostile = JSON.parse('{"__proto__":{"polluted":true},"ok":"1"}') as object;
    const many = Object.fromEntries(Array.from({ length: 500 }, (_, i) => [`h${i}`, i]));
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const out = sanitizeHeaders({ ...hostile, ...many, big: 'v'.repeat(10_000), cyclic });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(out.ok).toBe('1');
    expect(Object.keys(out).length).toBeLessThanOrEqual(64);
    expect(sanitizeHeaders(null)).toEqual({});
    expect(sanitizeHeaders({ big: 'v'.repeat(10_000), b: Buffer.from('x') })).toEqual({
      big: 'v'.repeat(4096),
      b: 'x',
    });
    expect(sanitizeHeaders({ cyclic }).cyclic).toBe('[unserialisable]');
  });
});
