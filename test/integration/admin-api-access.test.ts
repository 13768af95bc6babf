import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { adminAccess, adminStartLine, isLoopbackHost } from '../../workers/service/admin/index.js';
import { parseServiceConfig } from '../../workers/service/config.js';
import { startService } from '../../workers/service/service.js';
import { onCleanup } from '../harness/cleanup.js';
import { cleanQueue, connect, redisUrl, uniqueQueueName } from '../harness/redis.js';
import type { Json } from './admin-api-helpers.js';
import { token, startAdmin } from './admin-api-helpers.js';

/**
 * Who may use the admin API: a token, else loopback only; a non-loopback host
 * without a token gets no admin route (the routes themselves are in
 * `admin-api.test.ts`).
 */

describe('who may use the admin API', () => {
  it('takes a token, else loopback only', () => {
    expect(isLoopbackHost('127.0.0.1')).toBe(true);
    expect(isLoopbackHost('127.8.0.1')).toBe(true);
    expect(isLoopbackHost('::1')).toBe(true);
    expect(isLoopbackHost('localhost')).toBe(true);
    expect(isLoopbackHost('0.0.0.0')).toBe(false);
    expect(isLoopbackHost('::')).toBe(false);
    expect(isLoopbackHost('10.0.0.1')).toBe(false);
    expect(isLoopbackHost('example.com')).toBe(false);
    expect(adminAccess('0.0.0.0', token)).toEqual({ kind: 'token', token });
    expect(adminAccess('127.0.0.1', undefined)).toEqual({ kind: 'loopback' });
    expect(adminAccess('0.0.0.0', undefined)).toEqual({ kind: 'refused' });
    expect(adminStartLine({ kind: 'token', token }, 'http://h:1', 'h')).not.toContain(token);
  });

  it('on loopback without a token, serves the admin API and the dashboard to anyone who can connect', async () => {
    const redis = connect();
    onCleanup(() => redis.disconnect());
    const names = { jobs: uniqueQueueName('admin-lo'), hooks: uniqueQueueName('admin-lo-h') };
    const server = await startAdmin(redis, names, { kind: 'loopback' });
    onCleanup(async () => {
      await server.app.close();
      for (const q of server.queues.values()) await q.close();
    });
    expect((await fetch(`${server.url}/admin/queues`)).status).toBe(200);
    expect((await fetch(`${server.url}/`)).status).toBe(200);
    expect(
      (await fetch(`${server.url}/assets/vendor/preact.mjs`)).headers.get('content-type'),
    ).toContain('javascript');
  });

  it('on a non-loopback host without a token, serves no admin route and says why', async () => {
    const redis = connect();
    onCleanup(() => redis.disconnect());
    const names = { jobs: uniqueQueueName('admin-off'), hooks: uniqueQueueName('admin-off-h') };
    const server = await startAdmin(redis, names, { kind: 'refused' });
    onCleanup(async () => {
      await server.app.close();
      for (const q of server.queues.values()) await q.close();
    });
    for (const path of [
      '/',
      '/admin/queues',
      `/admin/queues/${names.jobs}/dlq`,
      '/admin/openapi.json',
    ]) {
      const res = await fetch(`${server.url}${path}`);
      expect(res.status, path).toBe(403);
      expect((await res.json()).error).toBe(
        'the admin API and dashboard are off: host 0.0.0.0 is not loopback and no admin token is set; set admin.token (REQUEUE_ADMIN_TOKEN) to serve them',
      );
    }
    // Intake still answers.
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  });

  it('the service reads REQUEUE_ADMIN_TOKEN, logs one line about the admin API, never the token', async () => {
    const lines: string[] = [];
    const capture = createLogger({
      level: 'info',
      destination: { write: (line: string) => lines.push(line) },
    });
    const hooks = uniqueQueueName('admin-svc');
    const redis = connect();
    onCleanup(async () => {
      await cleanQueue(redis, hooks);
      redis.disconnect();
    });
    const jobs = uniqueQueueName('admin-svc-jobs');
    onCleanup(() => cleanQueue(redis, jobs));
    const retryPolicy = { strategy: 'fixed', baseMs: 60_000, capMs: 60_000, maxAttempts: 3 };
    const config = parseServiceConfig(
      {
        port: 0,
        redisUrl: redisUrl(),
        webhooks: { queue: hooks },
        queues: [{ name: jobs, handler: 'examples/flaky-handler.mjs', policy: retryPolicy }],
      },
      { REQUEUE_ADMIN_TOKEN: token },
    );
    expect(config.admin.token).toBe(token);
    const service = await startService(config, capture);
    onCleanup(() => service.stop());
    expect((await fetch(`${service.url}/admin/queues`)).status).toBe(401);
    const ok = await fetch(`${service.url}/admin/queues`, {
      headers: { authorization: `bearer ${token}` },
    });
    expect(ok.status).toBe(200);
    const page = await fetch(`${service.url}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toContain('text/html');
    // Nothing from elsewhere: scripts, styles and data from the service only, the import map by its hash.
    expect(page.headers.get('content-security-policy')).toMatch(
      /^default-src 'self'; script-src 'self' 'sha256-[A-Za-z0-9+/]+=*'; style-src 'self';/,
    );
    // A real retry: the job's view and the schedule say when it runs next, and that it is a retry.
    const auth = { authorization: `Bearer ${token}` };
    const added = await fetch(`${service.url}/v1/jobs/${jobs}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ data: { fail: 'always' } }),
    });
    const { id } = (await added.json()) as { id: string };
    let view: Json;
    for (let i = 0; i < 100; i += 1) {
      view = await (
        await fetch(`${service.url}/admin/queues/${jobs}/jobs/${id}`, { headers: auth })
      ).json();
      if (view.where === 'delayed') break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(view).toMatchObject({ where: 'delayed', delayKind: 'retry', attemptsStarted: 1 });
    const failedAt = view.history[0].finishedAt as number;
    expect(view.nextAttemptAt).toBeGreaterThanOrEqual(failedAt + 59_000);
    expect(view.nextAttemptAt).toBeLessThanOrEqual(failedAt + 61_000);
    const schedule = await (
      await fetch(`${service.url}/admin/queues/${jobs}/schedule`, { headers: auth })
    ).json();
    expect(schedule.due).toMatchObject({ overdue: 0, withinHour: 1, withinDay: 1, later: 0 });
    expect(schedule.upcoming).toEqual([
      {
        id,
        name: 'job',
        dueAt: view.nextAttemptAt,
        kind: 'retry',
        attempt: 1,
        lastError: 'service unavailable',
      },
    ]);

    const admin = lines.filter((l) => l.includes('admin API'));
    expect(admin).toHaveLength(1);
    expect(admin[0]).toContain('bearer token required');
    expect(lines.join('\n')).not.toContain(token);
    expect(() => parseServiceConfig({ admin: { token: 'short' } }, {})).toThrow(
      /config\.admin\.token/,
    );
  });
});
