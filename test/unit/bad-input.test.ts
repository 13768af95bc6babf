import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Redis } from 'ioredis';
import { bullPrefixOf, cleanedQueueName, connect, redisUrl } from '../harness/redis.js';
import { runCli } from '../../src/cli/program.js';
import { readEnv } from '../../src/config/env.js';
import { createLogger } from '../../src/config/logger.js';
import { parseBreakerOptions } from '../../src/policy/breaker/breaker-options.js';
import { parseBudgetOptions } from '../../src/policy/budget/budget-options.js';
import {
  classifyError,
  classifyOptionsSchema,
  type ClassifyOptions,
} from '../../src/policy/classify/classify.js';
import { storableDetails, storableResult } from '../../src/policy/outcome.js';
import { checkQueueSet, parseQueueName } from '../../src/policy/queue-name.js';
import { simulatePlan } from '../../src/policy/plan.js';
import { parseRetryPolicy } from '../../src/policy/retry-policy.js';
import { simulateContention } from '../../src/simulate/contention.js';
import { simulateOutage } from '../../src/simulate/outage.js';
import { ConfigError } from '../../src/errors/config-error.js';
import { parseConfig } from '../../src/util/parse-config.js';
import { retentionSchema } from '../../src/scheduler/dlq/retention-pass.js';
import { RequeueMetrics } from '../../src/scheduler/metrics.js';
import type { RequeueQueue } from '../../src/scheduler/queue.js';
import { parseServiceConfig } from '../../workers/service/config.js';
import {
  createIntakeServer,
  jsonDeeperThan,
  type IntakeServer,
} from '../../workers/service/http.js';
import { webhookJobSchema } from '../../workers/webhook/webhook-worker.js';
import { jobIdForKey, keyForJobId, keyIdPrefix } from '../../src/scheduler/job-id.js';
import { reservedNames } from '../harness/reserved-names.js';

/**
 * The bad-input table (issue 9, item 8): malformed input at every edge,
 * each with the clear error (naming the field) or the dead-letter reason it
 * must get. In-process calls of the parsers, validators and the intake
 * server (Fastify's inject); the process exit codes are proven by a few
 * real spawns in test/integration/edges.test.ts.
 */

/** Expects `fn` to throw a ConfigError whose message matches `message`. */
function expectConfigError(fn: () => unknown, message: RegExp): void {
  let thrown: unknown;
  try {
    fn();
  } catch (err) {
    thrown = err;
  }
  expect(thrown, 'expected a ConfigError').toBeInstanceOf(ConfigError);
  expect((thrown as Error).message).toMatch(message);
  expect((thrown as Error).message).not.toContain('\n');
}

const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

// ---------------------------------------------------------------- policy JSON
const policyCases: [string, unknown, RegExp][] = [
  ['a string', 'full-jitter', /^policy: .*expected object/],
  ['an array', [], /^policy: .*expected object/],
  ['null', null, /^policy: .*expected object/],
  ['an unknown strategy', { strategy: 'fibonacci' }, /^policy\.strategy: /],
  ['an unknown key', { strategy: 'fixed', retries: 3 }, /^policy: unknown key "retries"/],
  ['baseMs as a string', { baseMs: '1000' }, /^policy\.baseMs: .*expected number/],
  ['baseMs negative', { baseMs: -1 }, /^policy\.baseMs: /],
  ['baseMs NaN', { baseMs: NaN }, /^policy\.baseMs: /],
  ['baseMs Infinity', { baseMs: Infinity }, /^policy\.baseMs: /],
  ['baseMs over 30 days', { baseMs: 3e9, capMs: 3e9 }, /^policy\.baseMs: .*<=2592000000/],
  ['capMs below baseMs', { baseMs: 5000, capMs: 10 }, /^policy\.capMs: capMs must be ≥ baseMs/],
  ['capMs over 30 days', { capMs: 1e12 }, /^policy\.capMs: .*<=2592000000/],
  ['factor below 1', { factor: 0.5 }, /^policy\.factor: /],
  ['factor over 100', { factor: 1000 }, /^policy\.factor: .*<=100/],
  ['jitter over 1', { jitter: 2 }, /^policy\.jitter: /],
  ['jitter negative', { jitter: -0.1 }, /^policy\.jitter: /],
  ['randomMs negative', { randomMs: -5 }, /^policy\.randomMs: /],
  ['maxAttempts 0', { maxAttempts: 0 }, /^policy\.maxAttempts: /],
  ['maxAttempts fractional', { maxAttempts: 2.5 }, /^policy\.maxAttempts: /],
  ['maxAttempts 1000000', { maxAttempts: 1_000_000 }, /^policy\.maxAttempts: .*<=1000/],
  ['maxAttempts as a string', { maxAttempts: '5' }, /^policy\.maxAttempts: /],
  ['maxElapsedMs negative', { maxElapsedMs: -1 }, /^policy\.maxElapsedMs: /],
  ['maxElapsedMs over a year', { maxElapsedMs: 1e12 }, /^policy\.maxElapsedMs: /],
  ['maxElapsedMs a boolean', { maxElapsedMs: true }, /^policy\.maxElapsedMs: /],
];

// --------------------------------------------------------------- breaker JSON
const breakerCases: [string, unknown, RegExp][] = [
  ['failureRate 0', { failureRate: 0 }, /^breaker\.failureRate: /],
  ['failureRate over 1', { failureRate: 1.5 }, /^breaker\.failureRate: /],
  ['failureRate a string', { failureRate: '0.5' }, /^breaker\.failureRate: /],
  ['minimumRequests 0', { minimumRequests: 0 }, /^breaker\.minimumRequests: /],
  ['windowMs fractional', { windowMs: 10.5 }, /^breaker\.windowMs: /],
  ['buckets over 600', { buckets: 601 }, /^breaker\.buckets: /],
  ['openMs 0', { openMs: 0 }, /^breaker\.openMs: /],
  ['maxOpenMs below openMs', { openMs: 5000, maxOpenMs: 10 }, /^breaker\.maxOpenMs: /],
  ['openFactor below 1', { openFactor: 0.5 }, /^breaker\.openFactor: /],
  ['halfOpenProbes 0', { halfOpenProbes: 0 }, /^breaker\.halfOpenProbes: /],
  ['an unknown key', { threshold: 3 }, /^breaker: unknown key "threshold"/],
  ['an array', [1], /^breaker: /],
];

// ---------------------------------------------------------------- budget JSON
const budgetCases: [string, unknown, RegExp][] = [
  ['an unknown kind', { kind: 'leaky' }, /^budget\.kind: /],
  ['capacity 0', { capacity: 0 }, /^budget\.capacity: /],
  ['capacity over a million', { capacity: 2_000_000 }, /^budget\.capacity: .*<=1000000/],
  ['retryCost negative', { retryCost: -1 }, /^budget\.retryCost: /],
  ['timeoutCost fractional', { timeoutCost: 1.5 }, /^budget\.timeoutCost: /],
  ['successRefund a string', { successRefund: '1' }, /^budget\.successRefund: /],
  ['onEmpty unknown', { onEmpty: 'drop' }, /^budget\.onEmpty: /],
  ['ratio 0', { kind: 'ratio', ratio: 0 }, /^budget\.ratio: /],
  ['ratio over 1', { kind: 'ratio', ratio: 2 }, /^budget\.ratio: /],
  ['ratio windowMs over a day', { kind: 'ratio', windowMs: 1e9 }, /^budget\.windowMs: /],
  ['ratio minRetries negative', { kind: 'ratio', minRetries: -1 }, /^budget\.minRetries: /],
  ['an unknown key', { kind: 'token-bucket', size: 5 }, /^budget: unknown key "size"/],
];

// ---------------------------------------------------------- service config file
const handler = 'examples/flaky-handler.mjs';
const configCases: [string, unknown, RegExp][] = [
  ['not an object', [], /^config: must be a JSON object/],
  ['null', null, /^config: must be a JSON object/],
  ['an unknown key', { colour: 'blue' }, /^config: unknown key "colour"/],
  ['port as a string', { port: '8080' }, /^config\.port: .*expected number/],
  ['port over 65535', { port: 70000 }, /^config\.port: /],
  ['port negative', { port: -1 }, /^config\.port: /],
  ['host with a space', { host: 'local host' }, /^config\.host: /],
  ['host empty', { host: '' }, /^config\.host: /],
  ['redisUrl not a URL', { redisUrl: 'localhost:6379' }, /^config\.redisUrl: /],
  ['redisUrl http', { redisUrl: 'http://localhost:6379' }, /^config\.redisUrl: /],
  ['shutdownTimeoutMs over an hour', { shutdownTimeoutMs: 1e9 }, /^config\.shutdownTimeoutMs: /],
  ['logLevel verbose', { logLevel: 'verbose' }, /^config\.logLevel: /],
  [
    'a consumer of an unknown broker',
    { consumers: [{ broker: 'kafka' }] },
    /^config\.consumers\.0\.broker: /,
  ],
  [
    'a nats consumer without its durable',
    { consumers: [{ broker: 'nats', stream: 'S' }] },
    /^config\.consumers\.0\.consumer: /,
  ],
  [
    'two consumers with one retry queue',
    {
      consumers: [
        { broker: 'amqp', queue: 'a' },
        { broker: 'amqp', queue: 'b', retryQueue: 'a.retry' },
      ],
    },
    /config\.consumers\.1\.retryQueue/,
  ],
  [
    'allowPrivate "false" (a string)',
    { webhooks: { allowPrivate: 'false' } },
    /^config\.webhooks\.allowPrivate: .*expected boolean, received string/,
  ],
  [
    'enabled "true" (a string)',
    { webhooks: { enabled: 'true' } },
    /^config\.webhooks\.enabled: .*expected boolean/,
  ],
  [
    'webhook concurrency "16" (a string)',
    { webhooks: { concurrency: '16' } },
    /^config\.webhooks\.concurrency: /,
  ],
  [
    'webhook concurrency over 1000',
    { webhooks: { concurrency: 5000 } },
    /^config\.webhooks\.concurrency: .*<=1000/,
  ],
  ['webhook timeout 0', { webhooks: { timeoutMs: 0 } }, /^config\.webhooks\.timeoutMs: /],
  ['webhook queue with ":"', { webhooks: { queue: 'a:b' } }, /^config\.webhooks\.queue: /],
  ['webhook queue x.dlq', { webhooks: { queue: 'x.dlq' } }, /^config\.webhooks\.queue: .*\.dlq/],
  [
    'a webhook policy with capMs below baseMs',
    { webhooks: { policy: { baseMs: 5, capMs: 1 } } },
    /^config\.webhooks\.policy\.capMs: /,
  ],
  ['intake token too short', { intake: { token: 'short' } }, /^config\.intake\.token: /],
  [
    'intake maxBodyBytes over 64 MiB',
    { intake: { maxBodyBytes: 1e9 } },
    /^config\.intake\.maxBodyBytes: /,
  ],
  ['queues not an array', { queues: {} }, /^config\.queues: /],
  ['a queue without a handler', { queues: [{ name: 'a' }] }, /^config\.queues\.0\.handler: /],
  [
    'a queue named with ":"',
    { queues: [{ name: 'a:b', handler }] },
    /^config\.queues\.0\.name: .*":"/,
  ],
  [
    'a queue named x.dlq',
    { queues: [{ name: 'orders.dlq', handler }] },
    /^config\.queues\.0\.name: .*\.dlq/,
  ],
  [
    'two queues with one name',
    {
      queues: [
        { name: 'a', handler },
        { name: 'a', handler },
      ],
    },
    /^config\.queues\.1\.name: "a" is already used by config\.queues\.0\.name/,
  ],
  [
    'a queue named like the webhook queue',
    { queues: [{ name: 'webhooks', handler }] },
    /^config\.queues\.0\.name: "webhooks" is already used by config\.webhooks\.queue/,
  ],
  [
    'a queue concurrency of 0',
    { queues: [{ name: 'a', handler, concurrency: 0 }] },
    /^config\.queues\.0\.concurrency: /,
  ],
  [
    'a queue with an unknown key',
    { queues: [{ name: 'a', handler, retries: 3 }] },
    /^config\.queues\.0: unknown key "retries"/,
  ],
  // Issue 21, part 2: the admin API's allowed Host names.
  [
    'admin.allowedHosts with a space',
    { admin: { allowedHosts: ['bad host'] } },
    /^config\.admin\.allowedHosts\.0: must be an IP address or a host name/,
  ],
  [
    'admin.allowedHosts with a port',
    { admin: { allowedHosts: ['requeue.internal:8080'] } },
    /^config\.admin\.allowedHosts\.0: must be an IP address or a host name/,
  ],
  [
    'admin.allowedHosts a string',
    { admin: { allowedHosts: 'requeue.internal' } },
    /^config\.admin\.allowedHosts: .*expected array/,
  ],
];

// ------------------------------------------------------------------ environment
const envCases: [string, Record<string, string>, RegExp][] = [
  ['PORT eighty', { PORT: 'eighty' }, /^env\.PORT: /],
  [
    'REQUEUE_ADMIN_ALLOWED_HOSTS with a URL',
    { REQUEUE_ADMIN_ALLOWED_HOSTS: 'http://requeue.internal' },
    /^config\.admin\.allowedHosts\.0: must be an IP address or a host name/,
  ],
  ['PORT 1e3', { PORT: '1e3' }, /^env\.PORT: expected a whole number/],
  ['PORT 0x50', { PORT: '0x50' }, /^env\.PORT: /],
  ['PORT 70000', { PORT: '70000' }, /^env\.PORT: /],
  ['PORT -1', { PORT: '-1' }, /^env\.PORT: /],
  ['WEBHOOK_ALLOW_PRIVATE yes', { WEBHOOK_ALLOW_PRIVATE: 'yes' }, /^env\.WEBHOOK_ALLOW_PRIVATE: /],
  ['WEBHOOK_ALLOW_PRIVATE on', { WEBHOOK_ALLOW_PRIVATE: 'on' }, /^env\.WEBHOOK_ALLOW_PRIVATE: /],
  ['WEBHOOK_ALLOW_PRIVATE 2', { WEBHOOK_ALLOW_PRIVATE: '2' }, /^env\.WEBHOOK_ALLOW_PRIVATE: /],
  ['WEBHOOK_CONCURRENCY 0', { WEBHOOK_CONCURRENCY: '0' }, /^env\.WEBHOOK_CONCURRENCY: /],
  ['WEBHOOK_CONCURRENCY 2.5', { WEBHOOK_CONCURRENCY: '2.5' }, /^env\.WEBHOOK_CONCURRENCY: /],
  ['WEBHOOK_CONCURRENCY 100000', { WEBHOOK_CONCURRENCY: '100000' }, /^env\.WEBHOOK_CONCURRENCY: /],
  ['WEBHOOK_TIMEOUT_MS soon', { WEBHOOK_TIMEOUT_MS: 'soon' }, /^env\.WEBHOOK_TIMEOUT_MS: /],
  [
    'REQUEUE_SHUTDOWN_TIMEOUT_MS a week',
    { REQUEUE_SHUTDOWN_TIMEOUT_MS: '604800000' },
    /^env\.REQUEUE_SHUTDOWN_TIMEOUT_MS: /,
  ],
  ['LOG_LEVEL verbose', { LOG_LEVEL: 'verbose' }, /^env\.LOG_LEVEL: /],
  ['LOG_LEVEL INFO', { LOG_LEVEL: 'INFO' }, /^env\.LOG_LEVEL: /],
  ['WEBHOOK_QUEUE a:b', { WEBHOOK_QUEUE: 'a:b' }, /^config\.webhooks\.queue: /],
  ['WEBHOOK_QUEUE x.dlq', { WEBHOOK_QUEUE: 'x.dlq' }, /^config\.webhooks\.queue: /],
  ['HOST with a slash', { HOST: 'a/b' }, /^config\.host: /],
  ['REDIS_URL not a URL', { REDIS_URL: 'localhost' }, /^config\.redisUrl: /],
];

// ------------------------------------------------------------------ queue names
const queueNameCases: [string, unknown, RegExp][] = [
  ['empty', '', /must not be empty/],
  ['with ":"', 'a:b', /must not contain ":"/],
  ['with "/"', 'a/b', /must not contain "\/"/],
  ['with a space', 'a b', /spaces or control/],
  ['with a newline', 'a\nb', /spaces or control/],
  ['with a NUL', 'a\u0000b', /spaces or control/],
  ['ending .dlq', 'orders.dlq', /\.dlq/],
  ['ending .DLQ', 'orders.DLQ', /\.dlq/],
  ['201 characters', 'q'.repeat(201), /at most 200/],
  ['a number', 42, /must be a string/],
];

// ----------------------------------------------------------------- webhook jobs
const event = { id: 'evt_1', type: 'invoice.paid', payload: { n: 1 } };
const endpoint = { id: 'ep_1', url: 'https://hooks.example.com/in' };
const webhookCases: [string, unknown, RegExp][] = [
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
const classify: ClassifyOptions = classifyOptionsSchema.parse({});
const failureCases: [string, unknown, string, string][] = [
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
const resultCases: [string, unknown, string | undefined | false][] = [
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

// ------------------------------------------------------------------- CLI flags
const cliCases: [string, string[], RegExp][] = [
  ['plan --max-attempts 1000000', ['plan', '--max-attempts', '1000000'], /--max-attempts.*1000/],
  ['plan --max-attempts 0', ['plan', '--max-attempts', '0'], /--max-attempts/],
  ['plan --base-ms abc', ['plan', '--base-ms', 'abc'], /--base-ms: expected a number/],
  ['plan --cap-ms -5', ['plan', '--cap-ms', '-5'], /--cap-ms/],
  ['plan --cap-ms 1e13', ['plan', '--cap-ms', '1e13'], /--cap-ms/],
  ['plan --factor 1000', ['plan', '--factor', '1000'], /--factor/],
  ['plan --strategy nope', ['plan', '--strategy', 'nope'], /--strategy/],
  ['plan --samples 0', ['plan', '--samples', '0'], /--samples: must be ≥ 1/],
  ['plan --samples 1e9', ['plan', '--samples', '1000000000'], /--samples: must be ≤/],
  ['plan --samples 2.5', ['plan', '--samples', '2.5'], /--samples: expected an integer/],
  [
    'plan --samples × retries too many',
    ['plan', '--samples', '10000000', '--max-attempts', '100'],
    /--samples × retries/,
  ],
  ['plan --seed x', ['plan', '--seed', 'x'], /--seed: expected a number/],
  ['an unknown command', ['frobnicate'], /unknown command/],
  ['stats a:b', ['stats', 'a:b'], /<queue>: "a:b" must not contain ":"/],
  ['stats x.dlq', ['stats', 'x.dlq'], /<queue>: "x.dlq" must not end in "\.dlq"/],
  ['dlq list with a space', ['dlq', 'list', 'a b'], /<queue>: /],
  ['dlq list --limit 0', ['dlq', 'list', 'q', '--limit', '0'], /--limit: must be ≥ 1/],
  ['dlq list --limit 1e6', ['dlq', 'list', 'q', '--limit', '1000000'], /--limit: must be ≤ 10000/],
  ['dlq list --reason nope', ['dlq', 'list', 'q', '--reason', 'nope'], /--reason: expected one of/],
  ['dlq list --since never', ['dlq', 'list', 'q', '--since', 'never'], /--since: /],
  ['dlq replay with no filter', ['dlq', 'replay', 'q'], /give --id/],
  ['dlq replay --rate 0', ['dlq', 'replay', 'q', '--all', '--rate', '0'], /--rate: must be ≥/],
  ['dlq trim --max-count 0', ['dlq', 'trim', 'q', '--max-count', '0'], /--max-count: /],
  ['dlq trim --max-age-days 1e6', ['dlq', 'trim', 'q', '--max-age-days', '1000000'], /≤ 3650/],
  ['enqueue --data not JSON', ['enqueue', 'q', '--data', '{nope'], /--data: not valid JSON/],
  [
    'enqueue --delay-ms a year',
    ['enqueue', 'q', '--data', '{}', '--delay-ms', '31536000000'],
    /--delay-ms: must be ≤/,
  ],
  [
    'worker --concurrency 5000',
    ['worker', 'q', '--handler', handler, '--concurrency', '5000'],
    /--concurrency: must be ≤ 1000/,
  ],
  [
    'worker --policy not JSON',
    ['worker', 'q', '--handler', handler, '--policy', '{'],
    /--policy: not valid JSON/,
  ],
  [
    'worker --breaker out of range',
    ['worker', 'q', '--handler', handler, '--breaker', '{"failureRate":2}'],
    /--breaker\.failureRate: /,
  ],
  [
    'worker --budget unknown kind',
    ['worker', 'q', '--handler', handler, '--budget', '{"kind":"x"}'],
    /--budget\.kind: /,
  ],
  [
    'worker --lock-duration-ms 10',
    ['worker', 'q', '--handler', handler, '--lock-duration-ms', '10'],
    /--lock-duration-ms: must be ≥ 100/,
  ],
  [
    'worker --handler that does not exist',
    ['worker', 'q', '--handler', 'no/such.mjs'],
    /--handler: cannot load no\/such\.mjs/,
  ],
  [
    'worker --handler that exports no function',
    ['worker', 'q', '--handler', 'test/fixtures/not-a-handler.mjs'],
    /--handler: .* has no default export function/,
  ],
  // Issue 21, parts 4, 10 and 11: what each said before is in the label.
  [
    '--redis not-a-url (said "Invalid URL", exit 1)',
    ['stats', 'q', '--redis', 'not-a-url'],
    /^requeue: --redis: expected a redis:\/\/ or rediss:\/\/ URL .*got "not-a-url"$/,
  ],
  ['--redis http://…', ['dlq', 'list', 'q', '--redis', 'http://127.0.0.1:6379'], /--redis: /],
  ['--connect-timeout-ms 0', ['stats', 'q', '--connect-timeout-ms', '0'], /--connect-timeout-ms: /],
  ['--connect-timeout-ms x', ['doctor', '--connect-timeout-ms', 'x'], /--connect-timeout-ms: /],
  [
    '--connect-timeout-ms over an hour',
    ['stats', 'q', '--connect-timeout-ms', '7200000'],
    /--connect-timeout-ms: must be ≤ 3600000/,
  ],
  [
    'enqueue --data nested 10,000 deep (said "Maximum call stack size exceeded")',
    ['enqueue', 'q', '--data', '['.repeat(10_000) + ']'.repeat(10_000)],
    /^requeue: --data: nested deeper than 64 levels$/,
  ],
  [
    'worker --policy nested 10,000 deep',
    [
      'worker',
      'q',
      '--handler',
      handler,
      '--policy',
      '{"a":'.repeat(10_000) + '1' + '}'.repeat(10_000),
    ],
    /^requeue: --policy: nested deeper than 64 levels$/,
  ],
  [
    'dlq purge --id \'\' (said "purged 0")',
    ['dlq', 'purge', 'q', '--id', ''],
    /^requeue: --id: must not be empty$/,
  ],
  [
    "dlq replay --id ' '",
    ['dlq', 'replay', 'q', '--id', ' '],
    /^requeue: --id: must not be empty$/,
  ],
  [
    "dlq list --name ''",
    ['dlq', 'list', 'q', '--name', ''],
    /^requeue: --name: must not be empty$/,
  ],
  ["dlq show <id> ''", ['dlq', 'show', 'q', ''], /^requeue: <id>: must not be empty$/],
  [
    "endpoint enable <endpointId> ''",
    ['endpoint', 'enable', 'q', ''],
    /<endpointId>: must not be empty/,
  ],
  [
    'simulate contention --clients 10000 --trials 100000 (ran for hours)',
    ['simulate', '--scenario', 'contention', '--clients', '10000', '--trials', '100000'],
    /^requeue: --clients \(10000\)² × --trials \(100000\) × --strategies \(9\) is up to 9\.0e\+13 simulated calls/,
  ],
  [
    'simulate outage --clients 200000 --duration-ms 3600000 --mean-gap-ms 1 (ran for hours)',
    [
      'simulate',
      '--scenario',
      'outage',
      '--clients',
      '200000',
      '--duration-ms',
      '3600000',
      '--mean-gap-ms',
      '1',
    ],
    /^requeue: --clients \(200000\) × --duration-ms \(3600000\) ÷ min\(--timeout-ms, --mean-gap-ms \+ --min-delay-ms\) × --strategies \(9\)/,
  ],
  [
    'simulate outage --min-delay-ms 0.001 --timeout-ms 0.001 (tiny steps, the same product)',
    ['simulate', '--scenario', 'outage', '--min-delay-ms', '0.001', '--mean-gap-ms', '0.001'],
    /simulated requests, more than 1e\+7/,
  ],
  [
    'plan --samples 10000000 --max-attempts 6 (22 s of CPU, 376 MB)',
    ['plan', '--samples', '10000000', '--max-attempts', '6'],
    /^requeue: --samples × retries: at most 20000000 delays, got 10000000 × 5/,
  ],
  [
    'doctor --queue × 1001',
    ['doctor', ...Array.from({ length: 1001 }, (_, i) => ['--queue', `q${i}`]).flat()],
    /^requeue: --queue: at most 1000, got 1001$/,
  ],
];

/** A server that accepts connections and never answers (issue 21, part 4). */
let muteUrl = '';
/** Rows that need the run's Redis or the mute one: label, args, exit code, the one line. */
const redisCliCases: [string, (queue: string) => string[], number, RegExp][] = [
  [
    'dlq replay --id nope (said "replayed 0", exit 0)',
    (q) => ['dlq', 'replay', q, '--id', 'nope'],
    2,
    /^requeue: --id: no dead job "nope" in .*'s DLQ$/,
  ],
  [
    'dlq purge --id nope',
    (q) => ['dlq', 'purge', q, '--id', 'nope', '--reason', 'gone'],
    2,
    /^requeue: --id: no dead job "nope" in .*'s DLQ matching --reason gone$/,
  ],
  [
    'dlq replay --reason gone with nothing dead: says none matched, exit 0',
    (q) => ['dlq', 'replay', q, '--reason', 'gone'],
    0,
    /^replayed 0 dead jobs: none matching --reason gone$/,
  ],
  [
    'stats of an unknown queue (said zeros, exit 0)',
    (q) => ['stats', `${q}-typo`],
    2,
    /^requeue: <queue>: no queue "bad-input-.*-typo" on this Redis \(known: .*\)$/,
  ],
  [
    'breaker status of an unknown queue (said closed)',
    (q) => ['breaker', 'status', `${q}-typo`],
    2,
    /^requeue: <queue>: no queue "bad-input-.*-typo" on this Redis \(known: .*\)$/,
  ],
  [
    'breaker status --key never seen (said closed)',
    (q) => ['breaker', 'status', q, '--key', 'nope'],
    2,
    /^requeue: --key: no breaker "nope" on .*: never seen \(known: none\)$/,
  ],
  ...(
    [
      ['stats', 'q'],
      ['enqueue', 'q', '--data', '{}'],
      ['dlq', 'list', 'q'],
      ['dlq', 'replay', 'q', '--all'],
      ['breaker', 'status', 'q'],
      ['endpoint', 'list', 'q'],
      ['doctor'],
    ] as const
  ).map((args): [string, (queue: string) => string[], number, RegExp] => [
    `${args.join(' ')} against a mute Redis (hung 60 s or more)`,
    () => [...args, '--redis', muteUrl, '--connect-timeout-ms', '200'],
    2,
    /^requeue: --redis: no reply from Redis at redis:\/\/:\*\*\*@127\.0\.0\.1:\d+ within 200 ms/,
  ]),
];

describe('the bad-input table', () => {
  it.each(policyCases)('policy: %s', (_label, input, message) => {
    expectConfigError(() => parseRetryPolicy(input), message);
  });

  it.each(breakerCases)('breaker: %s', (_label, input, message) => {
    expectConfigError(() => parseBreakerOptions(input), message);
  });

  it.each(budgetCases)('budget: %s', (_label, input, message) => {
    expectConfigError(() => parseBudgetOptions(input), message);
  });

  it.each(configCases)('config file: %s', (_label, input, message) => {
    expectConfigError(() => parseServiceConfig(input), message);
  });

  it.each(envCases)('environment: %s', (_label, env, message) => {
    expectConfigError(() => parseServiceConfig({}, env), message);
  });

  it('environment: the one parser reads true/false/1/0 in any case, and nothing else', () => {
    for (const [raw, value] of [
      ['true', true],
      ['TRUE', true],
      ['1', true],
      ['false', false],
      ['0', false],
    ] as const) {
      expect(parseServiceConfig({}, { WEBHOOK_ALLOW_PRIVATE: raw }).webhooks.allowPrivate).toBe(
        value,
      );
    }
    expect(parseServiceConfig({}, { PORT: '' }).port).toBe(8080);
    expectConfigError(() => readEnv({ LOG_LEVEL: 'loud' }), /^env\.LOG_LEVEL: /);
    expectConfigError(() => readEnv({ REDIS_URL: 'nope' }), /^env\.REDIS_URL: /);
  });

  it.each(queueNameCases)('queue name: %s', (_label, name, message) => {
    expectConfigError(() => parseQueueName(name, 'queue'), message);
  });

  it("the service's webhooks.breaker took the generic breaker's defaults for the settings it left out", () => {
    const config = parseServiceConfig({ webhooks: { breaker: { openMs: 7_000 } } });
    // Kept as given: the webhook worker fills the rest with its own defaults.
    expect(config.webhooks.breaker).toEqual({ openMs: 7_000 });
    // Checked as the worker will use it, over the webhook defaults (maxOpenMs 30 s).
    expectConfigError(
      () => parseServiceConfig({ webhooks: { breaker: { openMs: 60_000 } } }),
      /config\.webhooks\.breaker\.maxOpenMs: maxOpenMs must be ≥ openMs/,
    );
    expectConfigError(
      () => parseServiceConfig({ webhooks: { breaker: { failureRate: 2 } } }),
      /config\.webhooks\.breaker\.failureRate/,
    );
  });

  it('queue names: duplicates in one process are refused', () => {
    expectConfigError(
      () =>
        checkQueueSet([
          { label: 'a', name: 'x' },
          { label: 'b', name: 'x' },
        ]),
      /^b: "x" is already used by a$/,
    );
  });

  it.each(webhookCases)('webhook job: %s', (_label, job, message) => {
    expectConfigError(() => parseConfig(webhookJobSchema, job, 'webhook'), message);
  });

  it('webhook job: a refused secret is never quoted in the error', () => {
    const bad = 'whsec_AAAA';
    try {
      parseConfig(webhookJobSchema, { endpoint: { ...endpoint, secret: bad }, event }, 'webhook');
    } catch (err) {
      expect((err as Error).message).not.toContain(bad);
    }
  });

  it.each(failureCases)('handler throws %s', (_label, thrown, kind, reason) => {
    expect(classifyError(thrown, classify, 0)).toMatchObject({ kind, reason });
  });

  it.each(resultCases)('handler returns %s', (_label, value, json) => {
    const stored = storableResult(value);
    if (json === false)
      expect(stored).toMatchObject({ requeueUnstorableResult: /not storable as JSON/ });
    // Serialising what is stored again never reads the handler's value again.
    else expect(JSON.stringify(stored)).toBe(json);
  });

  it('DLQ retention: out-of-bounds numbers are refused, naming the field', () => {
    const parse = (input: unknown) => parseConfig(retentionSchema, input, 'retention');
    expectConfigError(() => parse({ intervalMs: 0 }), /retention\.intervalMs/);
    expectConfigError(() => parse({ intervalMs: 86_400_000 }), /retention\.intervalMs/);
    expectConfigError(() => parse({ maxCount: 0 }), /retention\.maxCount/);
    expectConfigError(() => parse({ maxAgeMs: -1 }), /retention\.maxAgeMs/);
  });

  it('annotate() details: the fields that serialise are kept, the others named', () => {
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    const hostile = {
      get boom(): never {
        throw new Error('getter threw');
      },
    };
    const details: Record<string, unknown> = { seq: 4, big: 2n, cycle, hostile, gone: undefined };
    Object.defineProperty(details, '__proto__', { value: { x: 1 }, enumerable: true });
    const stored = storableDetails(details)!;
    expect(Object.keys(stored)).toEqual(['seq', '__proto__', 'annotateError']);
    expect(stored.seq).toBe(4);
    expect(Object.getPrototypeOf(stored)).toBe(Object.prototype);
    expect(stored.annotateError).toMatch(
      /^left out big \(not storable as JSON: .*BigInt.*\); cycle \(.*; hostile \(.*getter threw/,
    );
    expect(storableDetails({ ok: [1, 'two'] })).toEqual({ ok: [1, 'two'] });
    expect(storableDetails(undefined)).toBeUndefined();
  });
});

describe('the bad-input table: CLI flags (in process)', () => {
  let stderr: string;
  beforeAll(() => {
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      stderr += String(chunk);
      return true;
    });
    vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
  });
  afterAll(() => vi.restoreAllMocks());

  it.each(cliCases)('%s', async (_label, args, message) => {
    stderr = '';
    const code = await runCli(['node', 'requeue', ...args]);
    expect(code, stderr).toBe(2);
    const lines = stderr.trimEnd().split('\n');
    expect(lines, stderr).toHaveLength(1);
    expect(lines[0]).toMatch(message);
  });
});

it('the work bounds hold outside the CLI too: the simulators and simulatePlan refuse', () => {
  const policy = parseRetryPolicy({});
  expect(() => simulatePlan(policy, { samples: 10_000_000, random: () => 0.5 })).toThrow(
    /^samples × retries: at most 20000000 delays/,
  );
  expectConfigError(
    () =>
      simulateContention(['full-jitter'], {
        clients: 10_000,
        trials: 100_000,
        seed: 7,
        netMeanMs: 10,
        netSdMs: 2,
        policy,
      }),
    /^clients \(10000\)² × trials \(100000\) × strategies \(1\)/,
  );
  expectConfigError(
    () =>
      simulateOutage(['full-jitter'], {
        clients: 200_000,
        seed: 7,
        meanGapMs: 1,
        timeoutMs: 2_000,
        stopAtMs: 15_000,
        stopForMs: 20_000,
        durationMs: 3_600_000,
        server: {
          minDelayMs: 100,
          concurrencyLimit: 30,
          latencyFactor: 1.05,
          latencyK: 15,
          backlog: 1024,
        },
        policy,
      }),
    /^clients \(200000\) × durationMs \(3600000\) ÷ min\(timeoutMs, meanGapMs \+ minDelayMs\)/,
  );
});

describe('the bad-input table: CLI against Redis (in process)', () => {
  let output: string;
  let admin: Redis;
  let mute: Server;
  const muteSockets = new Set<Socket>();
  beforeAll(async () => {
    admin = connect();
    mute = createServer((socket) => {
      muteSockets.add(socket.on('error', () => undefined));
    });
    await new Promise<void>((resolve) => mute.listen(0, '127.0.0.1', resolve));
    muteUrl = `redis://:mute-s3cret@127.0.0.1:${(mute.address() as AddressInfo).port}`;
    for (const stream of [process.stdout, process.stderr])
      vi.spyOn(stream, 'write').mockImplementation((chunk: string | Uint8Array) => {
        output += String(chunk);
        return true;
      });
  });
  afterAll(async () => {
    vi.restoreAllMocks();
    admin.disconnect();
    for (const socket of muteSockets) socket.destroy();
    await new Promise<void>((resolve) => mute.close(() => resolve()));
  });

  it.each(redisCliCases)('%s', async (_label, args, exitCode, message) => {
    output = '';
    // Each row's queue is known (one BullMQ key), as a typo of it is not.
    const queue = cleanedQueueName(admin, 'bad-input');
    await admin.hset(`${bullPrefixOf(admin, queue)}:${queue}:meta`, 'version', 'bad-input');
    const given = args(queue);
    const withRedis = given.includes('--redis') ? given : [...given, '--redis', redisUrl()];
    const code = await runCli(['node', 'requeue', ...withRedis]);
    expect(code, output).toBe(exitCode);
    const lines = output.trimEnd().split('\n');
    expect(lines, output).toHaveLength(1);
    expect(lines[0]).toMatch(message);
    expect(output).not.toContain('mute-s3cret');
  });
});

// ------------------------------------------------------- intake bodies and paths
/** Set while the intake cases are collected, before any test runs. */
let intakeCaseCount = 0;
describe('the bad-input table: the intake API', () => {
  const token = 'a-very-secret-intake-token';
  const added: unknown[] = [];
  const fakeQueue = {
    add: async (name: string, data: unknown, opts: { policy?: unknown }) => {
      if (opts.policy !== undefined) parseRetryPolicy(opts.policy, 'policy');
      added.push({ name, data });
      return { id: 'job-1', name };
    },
  } as unknown as RequeueQueue;
  let app: IntakeServer;

  beforeAll(async () => {
    app = await createIntakeServer({
      queues: new Map([['jobs', fakeQueue]]),
      webhooks: { schema: webhookJobSchema, enqueue: async () => ({ id: 'ep_1/evt_1' }) },
      ready: async () => true,
      metrics: new RequeueMetrics(),
      token,
      maxBodyBytes: 65_536,
      logger: createLogger({ level: 'silent' }),
    });
    await app.ready();
  });
  afterAll(() => app.close());

  const post = (
    url: string,
    payload: string | object | undefined,
    headers: Record<string, string> = {},
  ) =>
    app.inject({
      method: 'POST',
      url,
      headers: {
        'content-type': 'application/json',
        authorization: `Bearer ${token}`,
        ...headers,
      },
      ...(payload === undefined
        ? {}
        : { payload: typeof payload === 'string' ? payload : JSON.stringify(payload) }),
    });

  const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);
  const intakeCases: [string, () => ReturnType<typeof post>, number, RegExp][] = [
    ['a path with %zz', () => post('/v1/jobs/%zz', { data: 1 }), 400, /bad request/],
    ['a path with %', () => post('/v1/jobs/%', { data: 1 }), 400, /bad request/],
    ['a path with %E0%A4%A', () => post('/v1/jobs/%E0%A4%A', { data: 1 }), 400, /bad request/],
    ['an unknown queue', () => post('/v1/jobs/nope', { data: 1 }), 404, /no queue "nope"/],
    ['an unknown path', () => post('/v2/jobs', { data: 1 }), 404, /not found/],
    [
      'a body nested 20 000 deep',
      () => post('/v1/jobs/jobs', `{"data":${deep(20_000)}}`),
      400,
      /deeper than 64/,
    ],
    [
      'a webhook payload nested 100 deep',
      () =>
        post(
          '/v1/webhooks',
          `{"endpoint":{"id":"e","url":"https://x.io"},"event":{"id":"e","type":"t","payload":${deep(100)}}}`,
        ),
      400,
      /deeper than 64/,
    ],
    [
      'a body over the limit',
      () => post('/v1/jobs/jobs', { data: 'x'.repeat(70_000) }),
      413,
      /65536/,
    ],
    ['a body that is not JSON', () => post('/v1/jobs/jobs', '{nope'), 400, /not valid JSON/],
    ['an empty body', () => post('/v1/jobs/jobs', undefined), 400, /./],
    ['a JSON array', () => post('/v1/jobs/jobs', '[1]'), 400, /body: /],
    ['a JSON string', () => post('/v1/jobs/jobs', '"x"'), 400, /body: /],
    ['null', () => post('/v1/jobs/jobs', 'null'), 400, /body/],
    [
      'text/plain',
      () => post('/v1/jobs/jobs', '{"data":1}', { 'content-type': 'text/plain' }),
      415,
      /send application\/json/,
    ],
    [
      'form-encoded',
      () =>
        post('/v1/jobs/jobs', 'data=1', { 'content-type': 'application/x-www-form-urlencoded' }),
      415,
      /send application\/json/,
    ],
    ['no data', () => post('/v1/jobs/jobs', { name: 'x' }), 400, /body\.data: required/],
    ['an unknown key', () => post('/v1/jobs/jobs', { data: 1, bogus: 1 }), 400, /"bogus"/],
    ['an empty name', () => post('/v1/jobs/jobs', { data: 1, name: '' }), 400, /body\.name: /],
    [
      'a name of 201 characters',
      () => post('/v1/jobs/jobs', { data: 1, name: 'n'.repeat(201) }),
      400,
      /body\.name: /,
    ],
    [
      'an idempotency key of 513 characters',
      () => post('/v1/jobs/jobs', { data: 1, idempotencyKey: 'k'.repeat(513) }),
      400,
      /body\.idempotencyKey: /,
    ],
    [
      'a negative delay',
      () => post('/v1/jobs/jobs', { data: 1, delayMs: -1 }),
      400,
      /body\.delayMs: /,
    ],
    [
      'a delay of a year',
      () => post('/v1/jobs/jobs', { data: 1, delayMs: 31_536_000_000 }),
      400,
      /body\.delayMs: /,
    ],
    [
      'a delay as a string',
      () => post('/v1/jobs/jobs', { data: 1, delayMs: '5' }),
      400,
      /body\.delayMs: /,
    ],
    [
      'a policy that is not an object',
      () => post('/v1/jobs/jobs', { data: 1, policy: 'fast' }),
      400,
      /body\.policy: /,
    ],
    [
      'a policy with 1 000 000 attempts',
      () => post('/v1/jobs/jobs', { data: 1, policy: { maxAttempts: 1_000_000 } }),
      400,
      /policy\.maxAttempts: /,
    ],
    [
      'a webhook without a URL',
      () => post('/v1/webhooks', { endpoint: { id: 'ep' }, event }),
      400,
      /body\.endpoint\.url: /,
    ],
    [
      'a webhook with a bad secret',
      () => post('/v1/webhooks', { endpoint: { ...endpoint, secret: 'x' }, event }),
      400,
      /body\.endpoint\.secret: /,
    ],
    ['no token', () => post('/v1/jobs/jobs', { data: 1 }, { authorization: '' }), 401, /token/],
    [
      'a wrong token',
      () => post('/v1/jobs/jobs', { data: 1 }, { authorization: 'Bearer wrong-wrong-wrong-wrong' }),
      401,
      /token/,
    ],
    [
      'the token under Basic',
      () => post('/v1/jobs/jobs', { data: 1 }, { authorization: `Basic ${token}` }),
      401,
      /token/,
    ],
    [
      'GET on a POST route',
      () => app.inject({ method: 'GET', url: '/v1/webhooks' }),
      405,
      /method/,
    ],
    [
      'DELETE on a job route',
      () => app.inject({ method: 'DELETE', url: '/v1/jobs/jobs' }),
      405,
      /method/,
    ],
    // Issue 21, part 2: whom the server answers.
    [
      'a Host that is not loopback (DNS rebinding)',
      () => post('/v1/jobs/jobs', { data: 1 }, { host: 'attacker.example' }),
      421,
      /host "attacker\.example" is not this service/,
    ],
    [
      'a cross-site Origin on a POST, token and all',
      () => post('/v1/jobs/jobs', { data: 1 }, { origin: 'http://attacker.example' }),
      403,
      /cross-site request refused: Origin http:\/\/attacker\.example/,
    ],
    [
      'Sec-Fetch-Site: same-site on a POST',
      () => post('/v1/jobs/jobs', { data: 1 }, { 'sec-fetch-site': 'same-site' }),
      403,
      /cross-site request refused \(Sec-Fetch-Site: same-site\)/,
    ],
  ];

  intakeCaseCount = intakeCases.length;
  it.each(intakeCases)('%s → %i', async (_label, request, status, message) => {
    const res = await request();
    expect(res.statusCode, res.body).toBe(status);
    expect((res.json() as { error: string }).error).toMatch(message);
  });

  it('the intake answered 500 to a path with %zz', async () => {
    const res = await post('/v1/jobs/%zz', { data: 1 });
    expect(res.statusCode).toBe(400);
  });

  it('the intake answered 500 to a deeply nested body', async () => {
    const body = `{"endpoint":${JSON.stringify(endpoint)},"event":{"id":"e","type":"t","payload":${deep(5_000)}}}`;
    const res = await post('/v1/webhooks', body);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ error: 'body nests deeper than 64 levels' });
  });

  it('a lowercase "bearer" was refused', async () => {
    for (const scheme of ['bearer', 'BEARER', 'Bearer', 'bEaReR']) {
      const res = await post('/v1/jobs/jobs', { data: 1 }, { authorization: `${scheme} ${token}` });
      expect(res.statusCode, scheme).toBe(202);
      expect(res.json()).toEqual({ queue: 'jobs', id: 'job-1' });
    }
  });

  it('accepts application/*+json and a charset', async () => {
    for (const type of ['application/json; charset=utf-8', 'application/vnd.api+json']) {
      const res = await post('/v1/jobs/jobs', { data: 1 }, { 'content-type': type });
      expect(res.statusCode, type).toBe(202);
    }
  });

  it('counts depth outside strings only', () => {
    expect(jsonDeeperThan('{"a":"[[[[[[[[[["}', 2)).toBe(false);
    expect(jsonDeeperThan('{"a":"\\"[[["}', 1)).toBe(false);
    expect(jsonDeeperThan('[[[]]]', 2)).toBe(true);
  });
});

// ------------------------------------------- keys named like BullMQ's or requeue's keys
/**
 * Issue 21, part 1: keys equal to a key name BullMQ or requeue owns, or shaped
 * to reach one. Each is accepted and gets an id in the key namespace that
 * names no key of either (`test/integration/reserved-keys.test.ts` runs them
 * through every entry point against Redis).
 */
const reservedKeyCases: [string, string][] = [
  ...reservedNames().map((name): [string, string] => [`the key "${name}"`, name]),
  ['a key shaped like a key id', `${keyIdPrefix}wait`],
  ['a key below a BullMQ key', 'repeat:x'],
  ['a key below a job', 'wait:lock'],
  ['a key "0" (BullMQ refuses id 0)', '0'],
  ['a key "0:x"', '0:x'],
  ['an integer key', '42'],
  ['a key of 512 characters', 'k'.repeat(512)],
];
describe('the bad-input table: keys named like BullMQ’s or requeue’s keys', () => {
  const reserved = new Set(reservedNames());
  it.each(reservedKeyCases)('%s gets a job id that names no BullMQ or requeue key', (_l, key) => {
    const id = jobIdForKey(key);
    expect(id.startsWith(keyIdPrefix)).toBe(true);
    expect(reserved.has(id)).toBe(false);
    expect(id).not.toContain(':');
    expect(id).not.toMatch(/^\d+$/);
    expect(keyForJobId(id)).toBe(key);
    expect(
      webhookJobSchema.safeParse({
        endpoint: { id: 'ep', url: 'https://example.com/hook' },
        event: { id: key.slice(0, 256), type: 't', payload: {} },
      }).success || /[^\x21-\x2d\x2f-\x7e]/.test(key),
    ).toBe(true);
  });
});

it('the table holds at least 150 cases', () => {
  const total =
    policyCases.length +
    breakerCases.length +
    budgetCases.length +
    configCases.length +
    envCases.length +
    queueNameCases.length +
    webhookCases.length +
    failureCases.length +
    resultCases.length +
    cliCases.length +
    redisCliCases.length +
    intakeCaseCount;
  expect(total).toBeGreaterThanOrEqual(150);
});

/** Issue 21, part 9: the worker's clock bound, named in one line (checked before any connection). */
describe('worker adaptiveConcurrency options', () => {
  const adaptiveCases: [string, unknown, RegExp][] = [
    ['floor 0', { floor: 0 }, /^worker\.adaptiveConcurrency\.floor: /],
    ['ceiling a string', { ceiling: '10' }, /^worker\.adaptiveConcurrency\.ceiling: /],
    ['ceiling over 1000', { ceiling: 5_000 }, /^worker\.adaptiveConcurrency\.ceiling: .*<=1000/],
    [
      'floor over ceiling',
      { floor: 9, ceiling: 3, initial: 3 },
      /^worker\.adaptiveConcurrency\.floor: must be ≤ ceiling/,
    ],
    [
      'initial outside the bounds',
      { initial: 500 },
      /^worker\.adaptiveConcurrency\.initial: must be between/,
    ],
    ['backoffRatio 1', { backoffRatio: 1 }, /^worker\.adaptiveConcurrency\.backoffRatio: /],
    [
      'latencyTargetMs NaN',
      { latencyTargetMs: NaN },
      /^worker\.adaptiveConcurrency\.latencyTargetMs: /,
    ],
    ['leaseMs over an hour', { leaseMs: 4_000_000 }, /^worker\.adaptiveConcurrency\.leaseMs: /],
    ['an unknown key', { max: 5 }, /^worker\.adaptiveConcurrency: unknown key "max"/],
    ['a number', 5, /^worker\.adaptiveConcurrency: .*expected object/],
  ];
  it.each(adaptiveCases)('%s', async (_label, adaptiveConcurrency, message) => {
    const { createWorker } = await import('../../src/scheduler/requeue-worker.js');
    let thrown: unknown;
    try {
      createWorker('ok', async () => undefined, {
        connection: 'redis://127.0.0.1:1',
        adaptiveConcurrency: adaptiveConcurrency as never,
      });
    } catch (err) {
      thrown = err;
    }
    expect((thrown as Error).name).toBe('ConfigError');
    expect((thrown as Error).message).toMatch(message);
    expect((thrown as Error).message).not.toContain('\n');
  });
});

describe('worker clock options', () => {
  const clockCases: [string, Record<string, unknown>, RegExp][] = [
    ['maxClockSkewMs 0', { maxClockSkewMs: 0 }, /^worker\.maxClockSkewMs: /],
    ['maxClockSkewMs negative', { maxClockSkewMs: -5_000 }, /^worker\.maxClockSkewMs: /],
    ['maxClockSkewMs a fraction', { maxClockSkewMs: 1.5 }, /^worker\.maxClockSkewMs: /],
    ['maxClockSkewMs a string', { maxClockSkewMs: '5s' }, /^worker\.maxClockSkewMs: /],
    ['maxClockSkewMs over an hour', { maxClockSkewMs: 4_000_000 }, /^worker\.maxClockSkewMs: /],
    ['clockCheckIntervalMs 0', { clockCheckIntervalMs: 0 }, /^worker\.clockCheckIntervalMs: /],
    ['clockCheckIntervalMs NaN', { clockCheckIntervalMs: NaN }, /^worker\.clockCheckIntervalMs: /],
  ];
  it.each(clockCases)('%s', async (_label, options, message) => {
    const { createWorker } = await import('../../src/scheduler/requeue-worker.js');
    let thrown: unknown;
    try {
      createWorker('ok', async () => undefined, { connection: 'redis://127.0.0.1:1', ...options });
    } catch (err) {
      thrown = err;
    }
    expect((thrown as Error).name).toBe('ConfigError');
    expect((thrown as Error).message).toMatch(message);
    expect((thrown as Error).message).not.toContain('\n');
  });
});
