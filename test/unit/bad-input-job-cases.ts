import { classifyOptionsSchema, type ClassifyOptions } from '../../src/policy/classify/classify.js';
import { secret } from './bad-input-config-cases.js';

/**
 * The bad-input table's rows for jobs: webhook jobs the schema refuses, and
 * what a handler throws or returns, with the verdict or stored JSON each gets.
 */

// ----------------------------------------------------------------- webhook jobs
export const event = { id: 'evt_1', type: 'invoice.paid', payload: { n: 1 } };
export const endpoint = { id: 'ep_1', url: 'https://hooks.example.com/in' };
export const webhookCases: [string, unknown, RegExp][] = [
  ['no endpoint', { event }, /^webhook\.endpoint: /],
  ['no event', { endpoint }, /^webhook\.event: /],
  ['an ftp URL', { endpoint: { ...endpoint, url: 'ftp://x.io/' }, event }, /endpoint\.url: /],
  ['a javascript: URL', { endpoint: { ...endpoint, url: 'javascript:alert(1)' }, event }, /url/],
  ['a URL without a host', { endpoint: { ...endpoint, url: 'https://' }, event }, /url/],
  ['a relative URL', { endpoint: { ...endpoint, url: '/hook' }, event }, /endpoint\.url: /],
  ['a URL as a number', { endpoint: { ...endpoint, url: 42 }, event }, /endpoint\.url: /],
  ['an endpoint id with "/"', { endpoint: { ...endpoint, id: 'a/b' }, event }, /endpoint\.id: /],
  ['an empty endpoint id', { endpoint: { ...endpoint, id: '' }, event }, /endpoint\.id: /],
  [
    'a secret without whsec_',
    { endpoint: { ...endpoint, secret: 'abc' }, event },
    /endpoint\.secret: .*whsec_/,
  ],
  [
    'a secret that is not base64',
    { endpoint: { ...endpoint, secret: 'whsec_!!!' }, event },
    /endpoint\.secret: /,
  ],
  [
    'a secret too short',
    { endpoint: { ...endpoint, secret: 'whsec_AAAA' }, event },
    /endpoint\.secret: .*bytes/,
  ],
  ['an empty secret list', { endpoint: { ...endpoint, secret: [] }, event }, /endpoint\.secret: /],
  [
    'eleven secrets',
    { endpoint: { ...endpoint, secret: Array(11).fill(secret) }, event },
    /endpoint\.secret: /,
  ],
  ['an event id with "."', { endpoint, event: { ...event, id: 'a.b' } }, /event\.id: /],
  ['an event id with a space', { endpoint, event: { ...event, id: 'a b' } }, /event\.id: /],
  ['an empty event type', { endpoint, event: { ...event, type: '' } }, /event\.type: /],
  [
    'a timestamp that is not ISO',
    { endpoint, event: { ...event, timestamp: 'yesterday' } },
    /event\.timestamp: /,
  ],
  ['a header name with a space', { endpoint, event, headers: { 'X Bad': 'v' } }, /headers/],
  [
    'a header value with a newline (header injection)',
    { endpoint, event, headers: { 'X-Ok': 'a\r\nSet-Cookie: x=1' } },
    /headers\.X-Ok: .*control/,
  ],
  ['a header value as a number', { endpoint, event, headers: { 'X-N': 1 } }, /headers\.X-N: /],
  [
    'maxConcurrency 0',
    { endpoint: { ...endpoint, maxConcurrency: 0 }, event },
    /endpoint\.maxConcurrency: /,
  ],
];

// ------------------------------------------------------------ handler results
export const classify: ClassifyOptions = classifyOptionsSchema.parse({});
export const failureCases: [string, unknown, string, string][] = [
  ['a 400', Object.assign(new Error('bad'), { status: 400 }), 'permanent', 'http-status'],
  ['a 401', Object.assign(new Error('no'), { statusCode: 401 }), 'permanent', 'http-status'],
  ['a 404 on response', { response: { status: 404 } }, 'permanent', 'http-status'],
  ['a 410', Object.assign(new Error('gone'), { status: 410 }), 'permanent', 'gone'],
  ['a 422', Object.assign(new Error('x'), { status: 422 }), 'permanent', 'http-status'],
  ['a 501', Object.assign(new Error('x'), { status: 501 }), 'permanent', 'http-status'],
  ['a 503', Object.assign(new Error('x'), { status: 503 }), 'retry', 'http-status'],
  ['a 429', Object.assign(new Error('x'), { status: 429 }), 'retry', 'http-status'],
  [
    'a status as a string',
    Object.assign(new Error('x'), { status: '503' }),
    'retry',
    'http-status',
  ],
  ['a status 999', Object.assign(new Error('x'), { status: 999 }), 'retry', 'unknown-error'],
  ['ECONNRESET', Object.assign(new Error('x'), { code: 'ECONNRESET' }), 'retry', 'network'],
  ['ETIMEDOUT', Object.assign(new Error('x'), { code: 'ETIMEDOUT' }), 'retry', 'timeout'],
  ['a thrown string', 'boom', 'retry', 'unknown-error'],
  ['a thrown null', null, 'retry', 'unknown-error'],
  ['a thrown undefined', undefined, 'retry', 'unknown-error'],
  ['a thrown number', 42, 'retry', 'unknown-error'],
  [
    'a thrown object whose getters throw',
    Object.defineProperty({}, 'status', {
      get() {
        throw new Error('getter');
      },
    }),
    'retry',
    'unknown-error',
  ],
  [
    'a PermanentError by name (another process)',
    Object.assign(new Error('x'), { name: 'PermanentError' }),
    'permanent',
    'permanent-error',
  ],
];

const cycle: Record<string, unknown> = {};
cycle.self = cycle;
/** An object whose getter works on its first read and throws on every later one. */
function readOnce(): Record<string, unknown> {
  let reads = 0;
  return Object.defineProperty({}, 'total', {
    enumerable: true,
    get: () => {
      reads += 1;
      if (reads > 1) throw new Error('read twice');
      return 1;
    },
  });
}
/** The JSON stored for a handler's value, or `false` for a note that it cannot be. */
export const resultCases: [string, unknown, string | undefined | false][] = [
  ['a BigInt', 10n, false],
  ['a cycle', cycle, false],
  [
    'a throwing toJSON',
    {
      toJSON() {
        throw new Error('nope');
      },
    },
    false,
  ],
  ['a plain object', { ok: true }, '{"ok":true}'],
  ['undefined', undefined, undefined],
  ['an object whose getter throws on its second read', readOnce(), '{"total":1}'],
  [
    'an object whose getter throws',
    Object.defineProperty({}, 'x', {
      enumerable: true,
      get: () => {
        throw new Error('getter threw');
      },
    }),
    false,
  ],
];
