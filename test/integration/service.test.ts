import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { createLogger, redactPaths } from '../../src/config/logger.js';
import { parseServiceConfig } from '../../workers/service/config.js';
import { chooseRedis, noRedisHelp } from '../../workers/service/embedded-redis.js';
import { startService, type RunningService } from '../../workers/service/service.js';
import { verifyWebhook } from '../../workers/webhook/index.js';
import { jobIdForKey } from '../../src/scheduler/job-id.js';
import { freePort, startRedisServer } from '../../src/redis/redis-server.js';
import { cleanQueue, connect, redisUrl, uniqueQueueName } from '../harness/redis.js';
import { promtoolCheck, sample } from '../harness/promtool.js';

const logger = createLogger({ level: 'silent' });
const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

describe('the requeue service', () => {
  const redis = connect();
  const webhookQueue = uniqueQueueName('svc-hooks');
  const jobQueue = uniqueQueueName('svc-jobs');
  let service: RunningService;
  const received: { id: string; attempt: number }[] = [];
  let failuresLeft = 2;
  const receiver = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      verifyWebhook(secret, req.headers, Buffer.concat(chunks));
      if (failuresLeft > 0) {
        failuresLeft -= 1;
        res.writeHead(503).end('down');
        return;
      }
      received.push({ id: String(req.headers['webhook-id']), attempt: received.length + 1 });
      res.writeHead(204).end();
    });
  });

  beforeAll(async () => {
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const config = parseServiceConfig(
      {
        port: 0,
        redisUrl: redisUrl(),
        webhooks: {
          queue: webhookQueue,
          allowPrivate: true,
          policy: { strategy: 'fixed', baseMs: 50, capMs: 50, maxAttempts: 5 },
        },
        queues: [{ name: jobQueue, handler: 'examples/flaky-handler.mjs', concurrency: 2 }],
        intake: { token: 'a-very-secret-intake-token' },
      },
      {},
    );
    service = await startService(config, logger);
  });

  afterAll(async () => {
    await service.stop();
    receiver.close();
    await cleanQueue(redis, webhookQueue);
    await cleanQueue(redis, jobQueue);
    redis.disconnect();
  });

  const post = (path: string, body: unknown, token = 'a-very-secret-intake-token') =>
    fetch(`${service.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });

  it('answers health and readiness', async () => {
    expect((await fetch(`${service.url}/healthz`)).status).toBe(200);
    const ready = await fetch(`${service.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready' });
  });

  it.each([
    [{ endpoint: { id: 'ep' } }, 'endpoint.url'],
    [
      { endpoint: { id: 'ep', url: 'ftp://x' }, event: { id: 'e', type: 't', payload: {} } },
      'endpoint.url',
    ],
    [{ endpoint: { id: 'ep', url: 'http://x' }, event: { type: 't', payload: {} } }, 'event.id'],
  ])('rejects a bad webhook body with a 400 naming the field (%j)', async (body, field) => {
    const res = await post('/v1/webhooks', body);
    expect(res.status).toBe(400);
    const json = (await res.json()) as { error: string; issues: { path: string }[] };
    expect(json.issues.map((i) => i.path)).toContain(field);
    expect(json.error).toContain(`body.${field}`);
  });

  it('rejects bad JSON, a wrong token and an unknown queue', async () => {
    expect((await post('/v1/webhooks', '{not json')).status).toBe(400);
    expect((await post('/v1/webhooks', {}, 'wrong-token-wrong-token-wrong')).status).toBe(401);
    expect((await post('/v1/jobs/nope', { data: {} })).status).toBe(404);
    const res = await post(`/v1/jobs/${jobQueue}`, { data: {}, bogus: 1 });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toContain('bogus');
  });

  it('delivers a webhook enqueued through the intake API, signed, after transient failures', async () => {
    const done = new Promise<void>((resolve) =>
      service.workers.find((w) => w.name === webhookQueue)!.once('job:completed', () => resolve()),
    );
    const res = await post('/v1/webhooks', {
      endpoint: {
        id: 'ep_1',
        url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`,
        secret,
      },
      event: { id: 'evt_1', type: 'invoice.paid', payload: { invoice: 42 } },
    });
    expect(res.status).toBe(202);
    await done;
    expect(received).toEqual([{ id: 'evt_1', attempt: 1 }]);
    expect(failuresLeft).toBe(0);
  });

  it('accepts a job for a handler queue and runs it', async () => {
    const worker = service.workers.find((w) => w.name === jobQueue)!;
    const done = new Promise<unknown>((resolve) =>
      worker.once('job:completed', (e) => resolve(e.result)),
    );
    const res = await post(`/v1/jobs/${jobQueue}`, {
      name: 'hello',
      data: { n: 1 },
      idempotencyKey: 'k-1',
    });
    expect(res.status).toBe(202);
    expect(await res.json()).toEqual({ queue: jobQueue, id: jobIdForKey('k-1'), key: 'k-1' });
    expect(await done).toEqual({ ok: true, attempt: 1 });
  });

  it('exposes Prometheus metrics', async () => {
    const text = await (await fetch(`${service.url}/metrics`)).text();
    expect(text).toMatch(
      new RegExp(
        `requeue_retries_scheduled_total\\{queue="${webhookQueue}",source="strategy"\\} 2`,
      ),
    );
    expect(text).toMatch(
      new RegExp(`requeue_jobs\\{queue="${webhookQueue}",state="completed"\\} 1`),
    );
    // The delivery took 3 attempts (two 503s), each retry's start measured; process metrics too.
    const q = { queue: webhookQueue };
    expect(sample(text, 'requeue_job_attempts_sum', q)).toBe(3);
    expect(sample(text, 'requeue_retry_lateness_seconds_count', q)).toBe(2);
    expect(sample(text, 'requeue_job_latency_seconds_count', q)).toBe(1);
    expect(sample(text, 'requeue_breaker_keys', { ...q, state: 'closed' })).toBe(1);
    expect(sample(text, 'process_cpu_user_seconds_total')).toBeGreaterThan(0);
    const checked = await promtoolCheck(text);
    expect(checked.output).toBe('');
    expect(checked.code).toBe(0);
  });
});

describe('service configuration', () => {
  it('names the field of an invalid value, from the file or the environment', () => {
    expect(() => parseServiceConfig({ webhooks: { concurrency: 0 } })).toThrow(
      /config\.webhooks\.concurrency/,
    );
    expect(() => parseServiceConfig({}, { PORT: 'eighty' })).toThrow(/env\.PORT/);
    expect(() => parseServiceConfig({ webhooks: { policy: { capMs: 1, baseMs: 5 } } })).toThrow(
      /config\.webhooks\.policy\.capMs/,
    );
    expect(() => parseServiceConfig({ colour: 'blue' })).toThrow(/colour/);
    expect(parseServiceConfig({}, { PORT: '9000', WEBHOOK_ALLOW_PRIVATE: '1' })).toMatchObject({
      port: 9000,
      webhooks: { allowPrivate: true, queue: 'webhooks' },
    });
  });
});

describe('the embedded Redis default', () => {
  it('uses the configured URL when there is one', async () => {
    expect(await chooseRedis('redis://example:1', '.requeue', logger)).toEqual({
      url: 'redis://example:1',
      source: 'config',
    });
  });

  it('uses the local Redis when one answers', async () => {
    const url = redisUrl();
    expect(await chooseRedis(undefined, '.requeue', logger, { localUrl: url })).toEqual({
      url,
      source: 'local',
    });
  });

  it('starts a redis-server with AOF under the data directory when nothing answers locally', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'requeue-data-'));
    const nobody = `redis://127.0.0.1:${await freePort()}`;
    const choice = await chooseRedis(undefined, dir, logger, { localUrl: nobody });
    try {
      expect(choice.source).toBe('embedded');
      const client = connect(choice.url);
      await client.set('x', '1');
      client.disconnect();
      expect(await readdir(dir)).toEqual(
        expect.arrayContaining([expect.stringMatching(/appendonly/)]),
      );
    } finally {
      await choice.server?.stop();
    }
  });

  it('says in one paragraph how to get a Redis when there is none', () => {
    expect(noRedisHelp).toMatch(/apt-get install redis-server/);
    expect(noRedisHelp).toMatch(/docker compose up/);
    expect(noRedisHelp.split('\n')).toHaveLength(1);
  });
});

describe('secrets in the service logs', () => {
  it('never writes the Redis password, the intake token or a webhook secret to a log line', async () => {
    const password = 'redis-pass-5f8d2c';
    const token = 'intake-token-9a7b6c5d4e3f';
    const server = await startRedisServer({ appendonly: false, args: ['--requirepass', password] });
    const lines: string[] = [];
    const captured = pino(
      { level: 'trace', redact: { paths: redactPaths, censor: '[redacted]' } },
      { write: (line: string) => lines.push(line) },
    );
    const queue = uniqueQueueName('svc-secret');
    const running = await startService(
      parseServiceConfig({
        port: 0,
        redisUrl: `redis://:${password}@127.0.0.1:${server.port}`,
        intake: { token },
        webhooks: { queue, policy: { strategy: 'fixed', baseMs: 50, capMs: 50, maxAttempts: 2 } },
      }),
      captured,
    );
    try {
      const dead = new Promise<void>((resolve) =>
        running.workers[0]!.once('job:dead-lettered', () => resolve()),
      );
      const res = await fetch(`${running.url}/v1/webhooks`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        // Loopback is refused by the SSRF guard: the job fails and dies, and is logged.
        body: JSON.stringify({
          endpoint: { id: 'ep', url: 'http://127.0.0.1:9/hook', secret },
          event: { id: 'evt_s', type: 't', payload: { secret, password } },
        }),
      });
      expect(res.status).toBe(202);
      await dead;
    } finally {
      await running.stop();
      await server.stop();
    }
    const log = lines.join('');
    expect(log).toContain('job dead-lettered');
    expect(log).toContain('redis://:***@127.0.0.1');
    for (const value of [password, token, secret, secret.slice('whsec_'.length)]) {
      expect(log).not.toContain(value);
    }
  });
});
