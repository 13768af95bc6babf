import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { parseServiceConfig } from '../../workers/service/config.js';
import { startService, type RunningService } from '../../workers/service/service.js';
import { verifyWebhook } from '../../workers/webhook/index.js';
import { cleanQueue, connect, redisUrl, uniqueQueueName } from '../harness/redis.js';

const logger = createLogger({ level: 'silent' });
const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

describe('the service: endpoints through the admin API, POST /v1/messages', () => {
  const redis = connect();
  const queue = uniqueQueueName('svc-msgs');
  let service: RunningService;
  const received: { path: string; headers: IncomingHttpHeaders; body: string }[] = [];
  const receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      if (req.url === '/signed') verifyWebhook(secret, req.headers, body);
      received.push({ path: req.url ?? '', headers: req.headers, body: body.toString() });
      res.writeHead(204).end();
    });
  });
  let base = '';

  beforeAll(async () => {
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
    const config = parseServiceConfig(
      {
        port: 0,
        redisUrl: redisUrl(),
        webhooks: {
          queue,
          allowPrivate: true,
          policy: { strategy: 'fixed', baseMs: 50, capMs: 50, maxAttempts: 5 },
        },
      },
      {},
    );
    service = await startService(config, logger);
  });

  afterAll(async () => {
    await service.stop();
    receiver.close();
    await cleanQueue(redis, queue);
    redis.disconnect();
  });

  const call = (method: string, path: string, body?: unknown) =>
    fetch(`${service.url}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  const admin = (method: string, path: string, body?: unknown) =>
    call(method, `/admin/queues/${queue}/endpoints${path}`, body);

  it('creates, shows, updates and deletes endpoints; fans a message out to the subscribed ones', async () => {
    const created = await admin('POST', '', {
      id: 'signed',
      url: `${base}/signed`,
      secrets: [secret],
      types: ['order.*'],
      headers: { authorization: 'Bearer receiver-token-123' },
    });
    expect(created.status).toBe(201);
    const view = await created.text();
    expect(view).not.toContain(secret);
    expect(view).not.toContain('receiver-token-123');
    expect(
      (await admin('POST', '', { id: 'other', url: `${base}/other`, types: ['user.*'] })).status,
    ).toBe(201);
    expect((await admin('POST', '', { id: 'signed', url: `${base}/x` })).status).toBe(409);
    const patched = await admin('PATCH', '/other', { types: ['user.*', 'order.shipped'] });
    expect(await patched.json()).toMatchObject({ id: 'other', types: ['user.*', 'order.shipped'] });
    const shown = await (await admin('GET', '/signed')).text();
    expect(JSON.parse(shown)).toMatchObject({ id: 'signed', types: ['order.*'] });
    expect(shown).not.toContain(secret);

    const message = { type: 'order.created', payload: { n: 1 }, id: 'order-1' };
    const sent = await call('POST', '/v1/messages', message);
    expect(sent.status).toBe(202);
    const answer = (await sent.json()) as { id: string; endpoints: { endpointId: string }[] };
    expect(answer.id).toBe('order-1');
    expect(answer.endpoints.map((e) => e.endpointId)).toEqual(['signed']);
    // The same id again: nothing sent twice.
    expect((await call('POST', '/v1/messages', message)).status).toBe(202);
    const shipped = (await (
      await call('POST', '/v1/messages', { type: 'order.shipped', payload: {} })
    ).json()) as { id: string; endpoints: { endpointId: string }[] };
    expect(shipped.id).toMatch(/^msg_[0-9a-f]{32}$/);
    expect(shipped.endpoints.map((e) => e.endpointId).sort()).toEqual(['other', 'signed']);
    for (let i = 0; i < 200 && received.length < 3; i++)
      await new Promise((r) => setTimeout(r, 25));
    await new Promise((r) => setTimeout(r, 200));
    expect(received.map((r) => r.path).sort()).toEqual(['/other', '/signed', '/signed']);
    expect(received.find((r) => r.path === '/signed')!.headers.authorization).toBe(
      'Bearer receiver-token-123',
    );

    expect(await (await admin('DELETE', '/other')).json()).toEqual({
      endpointId: 'other',
      deleted: true,
    });
    expect((await admin('DELETE', '/other')).status).toBe(404);
    expect((await admin('GET', '/other')).status).toBe(404);
  });

  it('answers bad endpoint and message fields with a 400 naming the field', async () => {
    const cases: [Response, RegExp][] = [
      [
        await admin('POST', '', { id: 'a', url: 'ftp://x.example/' }),
        /^body\.url: must be an http\(s\) URL$/,
      ],
      [
        await admin('POST', '', {
          id: 'a',
          url: `${base}/a`,
          types: Array.from({ length: 10_000 }, (_, i) => `t${i}`),
        }),
        /^body\.types: /,
      ],
      [
        await admin('POST', '', { id: 'a', url: `${base}/a`, secrets: ['not-a-secret'] }),
        /^body\.secrets\.0: must start with "whsec_"$/,
      ],
      [
        await admin('POST', '', { id: 'a', url: 'http://169.254.169.254/' }),
        /^endpoint\.url: refused to connect to 169\.254\.169\.254/,
      ],
      [
        await call('POST', '/v1/messages', { type: 'x'.repeat(201), payload: 1 }),
        /^body\.type: must be 1–200 visible ASCII characters$/,
      ],
      [
        await call('POST', '/v1/messages', { type: 'a', payload: 'x'.repeat(300_000) }),
        /^message\.payload: must be at most 262144 bytes as JSON, got 300002$/,
      ],
    ];
    for (const [response, message] of cases) {
      expect(response.status).toBe(400);
      expect(((await response.json()) as { error: string }).error).toMatch(message);
    }
  });

  it('keeps POST /v1/webhooks as it was', async () => {
    const before = received.length;
    const response = await call('POST', '/v1/webhooks', {
      endpoint: { id: 'direct', url: `${base}/direct` },
      event: { id: 'evt-1', type: 'x', payload: {} },
    });
    expect(response.status).toBe(202);
    expect(Object.keys((await response.json()) as object)).toEqual(['id']);
    for (let i = 0; i < 200 && received.length === before; i++)
      await new Promise((r) => setTimeout(r, 25));
    expect(received.at(-1)!.path).toBe('/direct');
  });
});
