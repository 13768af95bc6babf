import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { parseRetryPolicy } from '../../src/policy/retry-policy.js';
import { RequeueMetrics } from '../../src/scheduler/metrics.js';
import type { RequeueQueue } from '../../src/scheduler/queue.js';
import {
  createIntakeServer,
  jsonDeeperThan,
  type IntakeServer,
} from '../../workers/service/http.js';
import { webhookJobSchema } from '../../workers/webhook/webhook-worker.js';
import {
  policyCases,
  breakerCases,
  budgetCases,
  configCases,
  envCases,
  queueNameCases,
} from './bad-input-config-cases.js';
import { event, endpoint, webhookCases, failureCases, resultCases } from './bad-input-job-cases.js';
import { cliCases, redisCliCases } from './bad-input-cli-cases.js';

/**
 * The bad-input table's rows for the intake API (Fastify's inject; the rest of
 * the table is `bad-input.test.ts`), and the count of the whole table.
 */

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
