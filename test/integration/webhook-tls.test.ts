import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ConfigError } from '../../src/config/env.js';
import { RequeueMetrics } from '../../src/scheduler/metrics.js';
import { createQueue } from '../../src/scheduler/queue.js';
import type { RequeueWorker } from '../../src/scheduler/requeue-worker.js';
import { createWebhookWorker, enqueueWebhook } from '../../workers/webhook/webhook-worker.js';
import { onCleanup } from '../harness/cleanup.js';
import { cleanedQueueName, connect, redisUrl, type RedisClient } from '../harness/redis.js';
import { makeTestCerts, type KeyPair, type TestCerts } from '../harness/tls-certs.js';
import { WorkerEventLog } from '../harness/worker-events.js';

/**
 * Issue 24, item 8: a certificate the sender refuses (self-signed, expired,
 * for another name, from an unknown CA) is its own reason,
 * `tls-certificate`, in the history, the delivery log and the metrics, and
 * is retried on the schedule; an endpoint may trust its own CA (PEM) for
 * testing. Real loopback HTTPS servers, certificates made by openssl now.
 */

let certs: TestCerts;
let redis: RedisClient;
const servers = new Map<string, Server>();

async function serve(name: string, pair: KeyPair, chain = ''): Promise<void> {
  const server = createServer({ key: pair.key, cert: pair.cert + chain }, (req, res) => {
    req.resume();
    res.writeHead(200).end('ok');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.set(name, server);
}

const url = (name: string) =>
  `https://127.0.0.1:${(servers.get(name)!.address() as AddressInfo).port}/hook`;

beforeAll(async () => {
  certs = makeTestCerts();
  redis = connect();
  await serve('good', certs.good);
  await serve('chain', certs.good, certs.ca.cert);
  await serve('wrongName', certs.wrongName);
  await serve('expired', certs.expired);
  await serve('selfSigned', certs.selfSigned);
});

afterAll(() => {
  for (const server of servers.values()) server.close();
  redis.disconnect();
});

describe('webhook TLS', () => {
  it('classifies each refused certificate as tls-certificate, retries it on the schedule, logs and counts it; a trusted CA delivers', async () => {
    const name = cleanedQueueName(redis, 'tls');
    const queue = createQueue(name, {
      connection: redisUrl(),
      policy: { strategy: 'fixed', baseMs: 30, capMs: 30, maxAttempts: 2 },
    });
    const worker = createWebhookWorker(name, {
      connection: redisUrl(),
      allowPrivate: true,
      breaker: false,
      adaptiveConcurrency: false,
    });
    const metrics = new RequeueMetrics(undefined, { processMetrics: false });
    metrics.watch(worker as unknown as RequeueWorker<unknown, unknown>);
    const events = new WorkerEventLog(worker);
    onCleanup(async () => {
      await worker.close();
      await queue.close();
    });
    const refused = {
      'self-signed': [url('selfSigned'), undefined, 'DEPTH_ZERO_SELF_SIGNED_CERT'],
      untrusted: [url('good'), undefined, 'UNABLE_TO_VERIFY_LEAF_SIGNATURE'],
      chain: [url('chain'), undefined, 'SELF_SIGNED_CERT_IN_CHAIN'],
      expired: [url('expired'), certs.ca.cert, 'CERT_HAS_EXPIRED'],
      'wrong-name': [url('wrongName'), certs.ca.cert, 'ERR_TLS_CERT_ALTNAME_INVALID'],
    } as const;
    const send = (id: string, target: string, ca: string | undefined) =>
      enqueueWebhook(queue, {
        endpoint: { id, url: target, ...(ca !== undefined && { ca }) },
        event: { id: `evt-${id}`, type: 'tls.test', payload: {} },
      });
    for (const [id, [target, ca]] of Object.entries(refused)) await send(id, target, ca);
    await send('trusted', url('good'), certs.ca.cert);

    const done = await events.waitFor('job:completed');
    expect(done.jobId).toContain('trusted');
    const dead = await events.waitForCount('job:dead-lettered', 5);
    for (const [id, [, , code]] of Object.entries(refused)) {
      const record = dead.find((d) => d.jobId.includes(`${id}/`))!.record;
      expect(record.reason, id).toBe('max-attempts');
      expect(
        record.history.map((h) => h.classification),
        id,
      ).toEqual(['tls-certificate', 'tls-certificate']);
      expect(record.history[0]!.details, id).toMatchObject({ code });
      expect(record.history[0]!.decision, id).toBe('retry');
    }

    const log = worker.deliveryLog!.log;
    await vi.waitFor(async () =>
      expect((await log.search({ status: 'none' })).entries).toHaveLength(10),
    );
    const [last] = (await log.search({ endpointId: 'expired' })).entries;
    expect(last).toMatchObject({ reason: 'tls-certificate', code: 'CERT_HAS_EXPIRED' });
    expect((await log.search({ endpointId: 'trusted' })).entries[0]).toMatchObject({
      outcome: 'delivered',
      status: 200,
    });

    const text = await metrics.registry.metrics();
    expect(text).toContain(
      `requeue_attempt_failures_total{queue="${name}",reason="tls-certificate"} 10`,
    );
  });

  it('refuses a CA that is not a PEM certificate, naming the field', async () => {
    const queue = createQueue(cleanedQueueName(redis, 'tls-bad'), { connection: redisUrl() });
    onCleanup(() => queue.close());
    const job = (ca: string) => ({
      endpoint: { id: 'ep', url: url('good'), ca },
      event: { id: 'e1', type: 't', payload: {} },
    });
    for (const [ca, message] of [
      ['not a cert', /endpoint\.ca: must be a PEM certificate/],
      [
        '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n',
        /endpoint\.ca: is not a certificate/,
      ],
      [certs.ca.cert.repeat(60), /endpoint\.ca: must be at most 65536 characters/],
    ] as const) {
      const err = await enqueueWebhook(queue, job(ca)).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ConfigError);
      expect(String((err as Error).message)).toMatch(message);
      expect((err as Error).message).not.toContain('\n');
    }
  });
});
