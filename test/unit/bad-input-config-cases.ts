import { expect } from 'vitest';
import { ConfigError } from '../../src/errors/config-error.js';

/**
 * The bad-input table's rows for the parsers (policy, breaker, budget, config
 * file, environment, queue names), each with the one line that must name the
 * field; the tests that run them are in `bad-input.test.ts`.
 */

/** Expects `fn` to throw a ConfigError whose message matches `message`. */
export function expectConfigError(fn: () => unknown, message: RegExp): void {
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

export const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

// ---------------------------------------------------------------- policy JSON
export const policyCases: [string, unknown, RegExp][] = [
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
export const breakerCases: [string, unknown, RegExp][] = [
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
export const budgetCases: [string, unknown, RegExp][] = [
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
export const handler = 'examples/flaky-handler.mjs';
export const configCases: [string, unknown, RegExp][] = [
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
export const envCases: [string, Record<string, string>, RegExp][] = [
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
export const queueNameCases: [string, unknown, RegExp][] = [
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
