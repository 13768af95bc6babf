import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors/config-error.js';
import {
  endpointFieldsSchema,
  endpointIdSchema,
  endpointUpdateSchema,
} from '../../src/policy/endpoint-record.js';
import { parseRetryPolicy } from '../../src/policy/retry-policy.js';
import type { RequeueQueue } from '../../src/scheduler/queue.js';
import { parseConfig } from '../../src/util/parse-config.js';
import { checkEndpointUrl } from '../../workers/webhook/endpoints.js';
import { sendMessage } from '../../workers/webhook/messages.js';
import type { Resolver } from '../../workers/webhook/ssrf.js';
import type { EndpointRegistry } from '../../src/redis/endpoint-registry.js';

/**
 * The bad-input table's rows for endpoints and messages (issue 24, "Bad
 * input"; the rest of the table is `bad-input.test.ts`): each field refused
 * with one line naming it, never a stack trace, never the secret.
 */

const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const url = 'https://hooks.example.com/in';

function configError(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).not.toContain('\n');
    return (err as Error).message;
  }
  throw new Error('expected a ConfigError');
}

async function configErrorOf(work: Promise<unknown>): Promise<string> {
  const err = await work.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  expect((err as Error).message).not.toContain('\n');
  return (err as Error).message;
}

const endpointCases: [string, unknown, RegExp][] = [
  [
    'a URL that is not http(s)',
    { url: 'ftp://x.example/' },
    /^endpoint\.url: must be an http\(s\) URL$/,
  ],
  ['a URL that is not a URL', { url: 'not a url' }, /^endpoint\.url: must be an http\(s\) URL$/],
  [
    '10,000 event-type filters',
    { url, types: Array.from({ length: 10_000 }, (_, i) => `type.${i}`) },
    /^endpoint\.types: Too big: expected array to have <=256 items$/,
  ],
  [
    'an event-type filter over the bound',
    { url, types: ['t'.repeat(201)] },
    /^endpoint\.types\.0: must be 1–200 visible ASCII characters$/,
  ],
  [
    'a wildcard in the middle of a filter',
    { url, types: ['in*voice'] },
    /^endpoint\.types\.0: a wildcard must be "\*" or end a filter as "\.\*"/,
  ],
  [
    'a secret without whsec_',
    { url, secrets: ['MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'] },
    /^endpoint\.secrets\.0: must start with "whsec_"$/,
  ],
  [
    'a secret that is not base64',
    { url, secrets: ['whsec_!!!!'] },
    /^endpoint\.secrets\.0: must be "whsec_" followed by base64$/,
  ],
  [
    'a secret too short',
    { url, secrets: ['whsec_c2hvcnQ='] },
    /^endpoint\.secrets\.0: must decode to 24–64 bytes, got 5$/,
  ],
  ['eleven secrets', { url, secrets: Array(11).fill(secret) }, /^endpoint\.secrets: Too big/],
  ['a rate limit of 0', { url, rateLimit: { perSecond: 0 } }, /^endpoint\.rateLimit\.perSecond: /],
  [
    'a burst of 1.5',
    { url, rateLimit: { perSecond: 1, burst: 1.5 } },
    /^endpoint\.rateLimit\.burst: /,
  ],
  ['a header name with a space', { url, headers: { 'x bad': '1' } }, /^endpoint\.headers\.x bad: /],
  [
    'a header value with a newline',
    { url, headers: { 'x-a': 'a\r\nb' } },
    /^endpoint\.headers\.x-a: must not contain control characters$/,
  ],
  [
    '51 metadata entries',
    { url, metadata: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, 'v'])) },
    /^endpoint\.metadata: at most 50 entries$/,
  ],
  [
    'a retry policy with capMs below baseMs',
    { url, policy: { baseMs: 5, capMs: 1 } },
    /^endpoint\.policy\.capMs: /,
  ],
  ['an unknown field', { url, secret }, /^endpoint: unknown key "secret"$/],
];

describe('bad endpoint fields', () => {
  it.each(endpointCases)('%s', (_label, input, message) => {
    const text = configError(() => parseConfig(endpointFieldsSchema, input, 'endpoint'));
    expect(text).toMatch(message);
    expect(text).not.toContain(secret.slice(6));
  });

  it('an endpoint id with "/" or spaces', () => {
    expect(configError(() => parseConfig(endpointIdSchema, 'a/b', 'endpoint.id'))).toMatch(
      /^endpoint\.id: must be 1–200 characters, without spaces or "\/"$/,
    );
  });

  it('an update naming a field that does not exist', () => {
    expect(configError(() => parseConfig(endpointUpdateSchema, { uri: url }, 'endpoint'))).toBe(
      'endpoint: unknown key "uri"',
    );
  });

  it('a schedule step over capMs', () => {
    expect(
      configError(() =>
        parseRetryPolicy({ strategy: 'schedule', scheduleMs: [10], capMs: 5, baseMs: 1 }),
      ),
    ).toBe('policy.scheduleMs: every step must be ≤ capMs');
  });
});

describe('the SSRF guard at create time', () => {
  const resolvingTo =
    (address: string): Resolver =>
    (_host, _options, callback) =>
      callback(null, [{ address, family: 4 }]);

  it('refuses a private address without the allow flag, and lets it through with it', async () => {
    expect(await configErrorOf(checkEndpointUrl('http://10.1.2.3/hook', {}))).toMatch(
      /^endpoint\.url: refused to connect to 10\.1\.2\.3: .*allow it with allowPrivate or allowHosts$/,
    );
    await expect(checkEndpointUrl('http://10.1.2.3/hook', { allowPrivate: true })).resolves.toBe(
      undefined,
    );
  });

  it('refuses a name that resolves to a private address', async () => {
    expect(
      await configErrorOf(
        checkEndpointUrl('https://internal.example/', { resolve: resolvingTo('192.168.1.9') }),
      ),
    ).toMatch(/^endpoint\.url: refused to connect to internal\.example \(192\.168\.1\.9\)/);
  });

  it('refuses the metadata service even with allowPrivate', async () => {
    expect(
      await configErrorOf(checkEndpointUrl('http://169.254.169.254/', { allowPrivate: true })),
    ).toMatch(/^endpoint\.url: refused to connect to 169\.254\.169\.254/);
  });
});

describe('bad messages', () => {
  // Validation comes before any read: neither the queue nor the registry is reached.
  const unreached = {} as RequeueQueue;
  const registry = {} as EndpointRegistry;
  const send = (message: unknown) =>
    configErrorOf(sendMessage(unreached, message, { registry, maxPayloadBytes: 100 }));

  it.each([
    [
      'an event type over the bound',
      { type: 'x'.repeat(201), payload: 1 },
      /^message\.type: must be 1–200 visible ASCII characters$/,
    ],
    [
      'a payload over the size limit',
      { type: 'a', payload: 'x'.repeat(200) },
      /^message\.payload: must be at most 100 bytes as JSON, got 202$/,
    ],
    [
      'a message id with "."',
      { type: 'a', payload: 1, id: 'a.b' },
      /^message\.id: must be 1–256 visible ASCII characters, no "\."$/,
    ],
    ['no type', { payload: 1 }, /^message\.type: /],
    ['an unknown field', { type: 'a', payload: 1, data: 2 }, /^message: unknown key "data"$/],
  ] as [string, unknown, RegExp][])('%s', async (_label, message, expected) => {
    expect(await send(message)).toMatch(expected);
  });
});
