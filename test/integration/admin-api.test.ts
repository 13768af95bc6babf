import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deadReasons } from '../../src/errors/dead-reason.js';
import type { RedisClient } from '../../src/redis/connection.js';
import { LimitStore } from '../../src/redis/limit-store.js';
import { parseAdaptiveConcurrency } from '../../src/policy/limit/limit-options.js';
import { EndpointStore } from '../../src/redis/endpoint-store.js';
import { queueBreakerKey } from '../../src/scheduler/requeue-worker.js';
import { seedDead } from '../harness/dlq.js';
import { writesDuring } from '../harness/monitor.js';
import { cleanQueue, connect, uniqueQueueName } from '../harness/redis.js';
import type { Json } from './admin-api-helpers.js';
import { token, webhookSecret, startAdmin, deadRecord } from './admin-api-helpers.js';

describe('the admin API', () => {
  let redis: RedisClient;
  let names: { jobs: string; hooks: string };
  let server: Awaited<ReturnType<typeof startAdmin>>;
  const call = (path: string, init: RequestInit & { auth?: string | null } = {}) => {
    const headers: Record<string, string> = {};
    if (init.auth !== null) headers.authorization = `Bearer ${init.auth ?? token}`;
    if (init.body !== undefined) headers['content-type'] = 'application/json';
    return fetch(`${server.url}${path}`, { ...init, headers });
  };
  const json = async (path: string, init: RequestInit & { auth?: string | null } = {}) => {
    const res = await call(path, init);
    return { status: res.status, body: (await res.json()) as Json };
  };

  beforeAll(async () => {
    redis = connect();
    names = { jobs: uniqueQueueName('admin-jobs'), hooks: uniqueQueueName('admin-hooks') };
    server = await startAdmin(redis, names);
  });
  afterAll(async () => {
    await server.app.close();
    for (const q of server.queues.values()) await q.close();
    await cleanQueue(redis, names.jobs);
    await cleanQueue(redis, names.hooks);
    redis.disconnect();
  });

  it('refuses a request without the token or with a wrong one, and takes the right one', async () => {
    for (const auth of [null, 'wrong-token-wrong-token']) {
      const res = await call('/admin/queues', { auth });
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe('Bearer');
      expect(await res.json()).toEqual({ error: 'missing or wrong bearer token' });
    }
    const ok = await call('/admin/queues', { headers: {} });
    expect(ok.status).toBe(200);
  });

  it('lists the queues with the counts `requeue stats` gives', async () => {
    const jobs = server.queues.get(names.jobs)!;
    await jobs.add('a', { n: 1 });
    await jobs.add('b', { n: 2 }, { delayMs: 60_000 });
    const { status, body } = await json('/admin/queues');
    expect(status).toBe(200);
    const row = body.queues.find((q: { name: string }) => q.name === names.jobs);
    expect(row).toMatchObject({ kind: 'handler', breaker: true, budget: 'token-bucket' });
    expect(row.counts).toEqual(await jobs.counts());
    expect(row.counts).toMatchObject({ waiting: 1, delayed: 1 });
    expect((await json(`/admin/queues/${names.hooks}`)).body).toMatchObject({ kind: 'webhook' });
  });

  it('answers bad input with a 400 naming the field, an unknown queue or id with a 404', async () => {
    const cases: [string, RequestInit, number, string][] = [
      [`/admin/queues/${names.jobs}/dlq?reason=nope`, {}, 400, 'querystring.reason: '],
      [`/admin/queues/${names.jobs}/dlq?limit=0`, {}, 400, 'querystring.limit: '],
      [`/admin/queues/${names.jobs}/dlq?since=yesterday`, {}, 400, 'querystring.since: '],
      [`/admin/queues/${names.jobs}/dlq?colour=red`, {}, 400, 'unknown key "colour"'],
      [`/admin/queues/${names.jobs}/schedule?horizon=week`, {}, 400, 'querystring.horizon: '],
      [
        `/admin/queues/${names.jobs}/dlq/replay`,
        { method: 'POST', body: '{}' },
        400,
        'body.all: give id, reason or all: true',
      ],
      [
        `/admin/queues/${names.jobs}/dlq/purge`,
        { method: 'POST', body: '{"all":"yes"}' },
        400,
        'body.all: ',
      ],
      [
        `/admin/queues/${names.jobs}/breakers/open`,
        { method: 'POST', body: '{"key":""}' },
        400,
        'body.key: ',
      ],
      [
        `/admin/queues/${names.jobs}/dlq/replay`,
        { method: 'POST', body: '{"id":"x"' },
        400,
        'body is not valid JSON',
      ],
      ['/admin/queues/no-such-queue/dlq', {}, 404, 'no queue "no-such-queue" here'],
      [`/admin/queues/${names.jobs}/dlq/no-such-id`, {}, 404, 'no dead job "no-such-id"'],
      [`/admin/queues/${names.jobs}/jobs/no-such-id`, {}, 404, 'no job "no-such-id"'],
      [
        `/admin/queues/${names.jobs}/dlq/replay`,
        { method: 'POST', body: '{"id":"no-such-id"}' },
        404,
        'no dead job "no-such-id"',
      ],
      [
        `/admin/queues/${names.hooks}/endpoints/never-seen/enable`,
        { method: 'POST' },
        404,
        'no endpoint "never-seen"',
      ],
    ];
    for (const [path, init, status, message] of cases) {
      const res = await call(path, init);
      const text = await res.text();
      expect(res.status, `${path} ${text}`).toBe(status);
      expect(JSON.parse(text).error, path).toContain(message);
      expect(text).not.toMatch(/\bat .*\.(ts|js):\d+/);
    }
  });

  it('shows the retry schedule bucketed over the next minute, hour and day, each job with its next attempt', async () => {
    const name = names.hooks;
    const queue = server.queues.get(name)!;
    const before = Date.now();
    for (const delayMs of [20_000, 40_000, 600_000, 7_200_000, 172_800_000])
      await queue.add('later', { delayMs }, { delayMs });
    const { body } = await json(`/admin/queues/${name}/schedule?horizon=hour&limit=3`);
    expect(body.due).toEqual({
      overdue: 0,
      withinMinute: 2,
      withinHour: 3,
      withinDay: 4,
      later: 1,
    });
    expect(body.timeline.binMs).toBe(60_000);
    expect(body.timeline.counts).toHaveLength(60);
    expect(body.timeline.counts.reduce((a: number, b: number) => a + b, 0)).toBe(3);
    expect(body.timeline.counts[0]).toBe(2);
    // Due 600 s after the add, a few ms less after the request's now.
    expect(body.timeline.counts[9] + body.timeline.counts[10]).toBe(1);
    expect(body.upcoming).toHaveLength(3);
    expect(body.upcoming.map((j: { kind: string }) => j.kind)).toEqual([
      'scheduled',
      'scheduled',
      'scheduled',
    ]);
    const first = body.upcoming[0];
    expect(first.dueAt).toBeGreaterThanOrEqual(before + 20_000);
    expect(first.dueAt).toBeLessThanOrEqual(Date.now() + 20_000);
    // A job's own view says when it runs next.
    const view = await json(`/admin/queues/${name}/jobs/${encodeURIComponent(first.id)}`);
    expect(view.body).toMatchObject({
      where: 'delayed',
      nextAttemptAt: first.dueAt,
      delayKind: 'scheduled',
    });
    const day = await json(`/admin/queues/${name}/schedule?horizon=day&limit=0`);
    expect(day.body.timeline.counts).toHaveLength(96);
    expect(day.body.upcoming).toEqual([]);
  });

  it('lists, shows, replays and purges dead jobs, secrets blanked, renamed ids shown', async () => {
    const name = names.jobs;
    await seedDead(redis, deadRecord(name, 'd-1'));
    await seedDead(redis, deadRecord(name, 'd-2', { name: 'other', reason: 'max-attempts' }));
    await seedDead(redis, deadRecord(name, 'd-3', { reason: 'max-attempts' }));
    const list = await json(`/admin/queues/${name}/dlq?reason=permanent-error`);
    expect(list.body.total).toBe(1);
    expect(list.body.items.map((i: { id: string }) => i.id)).toEqual(['d-1']);
    const paged = await json(`/admin/queues/${name}/dlq?limit=1&offset=1`);
    expect(paged.body).toMatchObject({ total: 3, limit: 1, offset: 1 });
    expect(paged.body.items).toHaveLength(1);
    expect((await json(`/admin/queues/${name}/dlq?name=other`)).body.total).toBe(1);
    expect((await json(`/admin/queues/${name}/dlq/count?reason=max-attempts`)).body).toEqual({
      dead: 2,
    });

    const shown = await call(`/admin/queues/${name}/dlq/d-1`);
    const text = await shown.text();
    expect(text).not.toContain(webhookSecret);
    expect(text).not.toContain('pw@');
    expect(text).not.toContain('token=abc');
    const record = JSON.parse(text);
    expect(record).toMatchObject({
      id: 'd-1',
      where: 'dead',
      reason: 'permanent-error',
      attempts: 2,
    });
    expect(record.history).toHaveLength(2);
    expect(record.history[0]).toMatchObject({
      decision: 'retry',
      delayMs: 1000,
      details: { latencyMs: 100 },
    });
    expect((await json(`/admin/queues/${name}/jobs/d-1`)).body).toMatchObject({
      where: 'dead',
      nextAttemptAt: null,
    });

    // d-2's id is taken in the queue: it comes back under a fresh one.
    await server.queues.get(name)!.add('other', {}, { idempotencyKey: 'd-2' });
    const replayed = await json(`/admin/queues/${name}/dlq/replay`, {
      method: 'POST',
      body: JSON.stringify({ reason: 'max-attempts', name: 'other' }),
    });
    expect(replayed.status).toBe(200);
    expect(replayed.body).toMatchObject({ done: 1, total: 1 });
    expect(replayed.body.renamed).toEqual([{ from: 'd-2', to: expect.any(String) }]);
    const back = await json(`/admin/queues/${name}/jobs/${replayed.body.renamed[0].to}`);
    expect(back.body).toMatchObject({ where: 'waiting', replays: 1 });
    expect(back.body.history).toHaveLength(2);

    const purged = await json(`/admin/queues/${name}/dlq/purge`, {
      method: 'POST',
      body: JSON.stringify({ id: 'd-3' }),
    });
    expect(purged.body).toMatchObject({ done: 1, total: 1 });
    expect((await json(`/admin/queues/${name}/dlq`)).body.total).toBe(1);
  });

  it('finds a webhook job whose id has a slash (<endpoint>/<event>), percent-encoded in the path', async () => {
    await seedDead(redis, deadRecord(names.hooks, 'ep_1/evt_1'));
    const path = encodeURIComponent('ep_1/evt_1');
    expect((await json(`/admin/queues/${names.hooks}/dlq/${path}`)).body).toMatchObject({
      id: 'ep_1/evt_1',
      where: 'dead',
    });
    expect((await json(`/admin/queues/${names.hooks}/jobs/${path}`)).status).toBe(200);
  });

  it('opens and closes breakers, shows them and the budget as `requeue breaker status` does', async () => {
    const name = names.jobs;
    const opened = await json(`/admin/queues/${name}/breakers/open`, {
      method: 'POST',
      body: '{}',
    });
    expect(opened.body).toMatchObject({ key: queueBreakerKey, state: 'open', isolated: true });
    const status = await json(`/admin/queues/${name}/breakers`);
    expect(status.body.breakers).toEqual([
      expect.objectContaining({ key: queueBreakerKey, state: 'open' }),
    ]);
    expect(status.body.budget).toEqual({
      kind: 'token-bucket',
      tokens: 50,
      capacity: 50,
      denied: 0,
    });
    expect((await json(`/admin/queues/${name}/budget`)).body.budget).toMatchObject({ tokens: 50 });
    const closed = await json(`/admin/queues/${name}/breakers/close`, {
      method: 'POST',
      body: '{"resetBudget":true}',
    });
    expect(closed.body).toMatchObject({ state: 'closed', isolated: false });
  });

  it('shows each key’s adaptive limit and in flight as `requeue limits --json` does', async () => {
    const name = names.hooks;
    const store = new LimitStore(redis, name);
    const params = { ...parseAdaptiveConcurrency({}), leaseMs: 60_000 };
    await store.acquire('ep_7', 'a', params);
    await store.acquire('ep_7', 'b', params);
    await store.release('ep_7', 'b', { signal: 'overload', latencyMs: 1, startedAt: 0 }, params);
    const { status, body } = await json(`/admin/queues/${name}/limits`);
    expect(status).toBe(200);
    expect(body).toEqual({
      queue: name,
      keys: 1,
      limits: [
        {
          key: 'ep_7',
          limit: 7,
          admits: 7,
          threshold: 7,
          inFlight: 1,
          decreasedAt: expect.any(Number),
        },
      ],
    });
    expect((await json(`/admin/queues/${name}/limits?max=0`)).status).toBe(400);
  });

  it('lists webhook endpoints, disables and enables them', async () => {
    const name = names.hooks;
    const disabled = await json(`/admin/queues/${name}/endpoints/ep_9/disable`, {
      method: 'POST',
      body: JSON.stringify({ reason: 'gone: https://x.example/h?sig=secret-sig' }),
    });
    expect(disabled.body).toEqual({ endpointId: 'ep_9', disabled: true, changed: true });
    expect(
      await new EndpointStore({ connection: redis, cacheTtlMs: 0 }).isDisabled(name, 'ep_9'),
    ).toBe(true);
    const list = await json(`/admin/queues/${name}/endpoints`);
    expect(list.body.endpoints).toEqual([
      expect.objectContaining({
        endpointId: 'ep_9',
        disabled: true,
        reason: 'gone: https://x.example/h?sig=***',
      }),
    ]);
    const enabled = await json(`/admin/queues/${name}/endpoints/ep_9/enable`, { method: 'POST' });
    expect(enabled.body).toEqual({ endpointId: 'ep_9', disabled: false, changed: true });
    expect((await json(`/admin/queues/${name}/endpoints`)).body.endpoints).toEqual([]);
  });

  it('serves the dead reasons from the library’s one list (the dashboard kept a copy)', async () => {
    const { status, body } = await json('/admin/dlq/reasons');
    expect(status).toBe(200);
    expect(body).toEqual({ reasons: [...deadReasons] });
  });

  it('publishes an OpenAPI document that lists every admin route', async () => {
    const { status, body } = await json('/admin/openapi.json');
    expect(status).toBe(200);
    expect(body.openapi).toMatch(/^3\./);
    const documented = Object.entries(body.paths as Record<string, Record<string, unknown>>)
      .flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`))
      .sort();
    const served = server.routes
      .filter((r) => r.includes(' /admin/') && !r.endsWith('/openapi.json'))
      .map((r) => r.replace(/:(\w+)/g, '{$1}'))
      .sort();
    expect(served.length).toBeGreaterThanOrEqual(16);
    expect(documented).toEqual(served);
    expect(
      body.paths['/admin/queues/{queue}/dlq'].get.parameters.map((p: { name: string }) => p.name),
    ).toEqual(expect.arrayContaining(['reason', 'name', 'since', 'until', 'limit', 'offset']));
  });

  it('looking never writes: every GET route sends no write command', async () => {
    const name = names.jobs;
    await seedDead(redis, deadRecord(name, 'ro-1'));
    await server.queues.get(name)!.add('ro', {}, { delayMs: 30_000, idempotencyKey: 'ro-live' });
    const paths = [
      '/admin/queues',
      `/admin/queues/${name}`,
      `/admin/queues/${name}/schedule?horizon=minute`,
      `/admin/queues/${name}/jobs/ro-live`,
      `/admin/queues/${name}/jobs/ro-1`,
      '/admin/dlq/reasons',
      `/admin/queues/${name}/dlq?reason=permanent-error`,
      `/admin/queues/${name}/dlq/count`,
      `/admin/queues/${name}/dlq/ro-1`,
      `/admin/queues/${name}/breakers`,
      `/admin/queues/${name}/budget`,
      `/admin/queues/${name}/limits?max=5`,
      `/admin/queues/${names.hooks}/endpoints`,
      `/admin/queues/${names.hooks}/breakers`,
    ];
    const writes = await writesDuring(redis, name, async () => {
      for (const path of paths) expect((await call(path)).status, path).toBe(200);
    });
    expect(writes).toEqual([]);
  });
});
