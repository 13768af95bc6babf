import { describe, expect, it } from 'vitest';
import { readEnv } from '../../src/config/env.js';
import { parseBreakerOptions } from '../../src/policy/breaker/breaker-options.js';
import { parseBudgetOptions } from '../../src/policy/budget/budget-options.js';
import { classifyError } from '../../src/policy/classify/classify.js';
import { storableDetails, storableResult } from '../../src/policy/outcome.js';
import { checkQueueSet, parseQueueName } from '../../src/policy/queue-name.js';
import { simulatePlan } from '../../src/policy/plan.js';
import { parseRetryPolicy } from '../../src/policy/retry-policy.js';
import { simulateContention } from '../../src/simulate/contention.js';
import { simulateOutage } from '../../src/simulate/outage.js';
import { parseConfig } from '../../src/util/parse-config.js';
import { retentionSchema } from '../../src/scheduler/dlq/retention-pass.js';
import { parseServiceConfig } from '../../workers/service/config.js';
import { webhookJobSchema } from '../../workers/webhook/webhook-worker.js';
import { jobIdForKey, keyForJobId, keyIdPrefix } from '../../src/scheduler/job-id.js';
import { reservedNames } from '../harness/reserved-names.js';
import {
  expectConfigError,
  policyCases,
  breakerCases,
  budgetCases,
  configCases,
  envCases,
  queueNameCases,
} from './bad-input-config-cases.js';
import {
  event,
  endpoint,
  webhookCases,
  classify,
  failureCases,
  resultCases,
} from './bad-input-job-cases.js';

/**
 * The bad-input table (issue 9, item 8): malformed input at every edge,
 * each with the clear error (naming the field) or the dead-letter reason it
 * must get. In-process calls of the parsers, validators and the intake
 * server (Fastify's inject); the process exit codes are proven by a few
 * real spawns in test/integration/edges.test.ts.
 */

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
