import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/env.js';
import type { WorkerEvents } from '../../src/scheduler/events.js';
import { RequeueMetrics } from '../../src/scheduler/metrics.js';
import { createQueue } from '../../src/scheduler/queue.js';
import type { RequeueWorker } from '../../src/scheduler/requeue-worker.js';
import { createWebhookWorker, enqueueWebhook } from '../../workers/webhook/webhook-worker.js';
import { onCleanup } from '../harness/cleanup.js';
import { cleanedQueueName, connect, redisUrl, type RedisClient } from '../harness/redis.js';
import { WorkerEventLog } from '../harness/worker-events.js';

/**
 * Issue 24, item 4: an endpoint whose deliveries all fail for `afterMs` is
 * disabled with a reason, an event, a metric and the owner's hook; its
 * pending deliveries wait (deferred, not dead-lettered) and are delivered
 * once it is enabled; a 410 disables at once and dead-letters as `gone`.
 */

let receiver: Server;
let redis: RedisClient;
let up = false;

beforeAll(async () => {
  redis = connect();
  receiver = createServer((req, res) => {
    req.resume();
    if (req.url === '/gone') return void res.writeHead(410).end();
    res.writeHead(up ? 200 : 503).end();
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
});

afterAll(() => {
  receiver.close();
  redis.disconnect();
});

describe('auto-disable', () => {
  it('disables an endpoint failing for afterMs; its deliveries wait and go out once it is enabled; 410 disables at once', async () => {
    const name = cleanedQueueName(redis, 'autodisable');
    const base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
    const queue = createQueue(name, {
      connection: redisUrl(),
      policy: { strategy: 'fixed', baseMs: 100, capMs: 100, maxAttempts: 1_000 },
    });
    const told: WorkerEvents['endpoint:disabled'][0][] = [];
    const worker = createWebhookWorker(name, {
      connection: redisUrl(),
      allowPrivate: true,
      breaker: false,
      adaptiveConcurrency: false,
      deliveryLog: false,
      logger: { level: 'silent' },
      autoDisable: { afterMs: 1_000, recheckMs: 200 },
      onEndpointDisabled: (e) => told.push(e),
    });
    const metrics = new RequeueMetrics(undefined, { processMetrics: false });
    metrics.watch(worker as unknown as RequeueWorker<unknown, unknown>);
    const events = new WorkerEventLog(worker);
    const deferred: string[] = [];
    worker.on('job:deferred', (e) => deferred.push(e.jobId));
    onCleanup(async () => {
      await worker.close();
      await queue.close();
    });
    const send = (endpoint: string, path: string, id: string) =>
      enqueueWebhook(queue, {
        endpoint: { id: endpoint, url: `${base}${path}` },
        event: { id, type: 't', payload: {} },
      });
    for (let i = 0; i < 3; i++) await send('down', '/down', `m-${i}`);
    await send('gone', '/gone', 'g-1');

    const dead = await events.waitFor('job:dead-lettered');
    expect(dead.record.reason).toBe('gone');
    await expect
      .poll(() => told.map((e) => e.cause).sort(), { timeout: 15_000 })
      .toEqual(['failing', 'gone']);
    const failing = told.find((e) => e.cause === 'failing')!;
    expect(failing.endpointId).toBe('down');
    expect(failing.reason).toMatch(/^auto-disabled: every delivery failed since /);
    expect(failing.disabledAt - failing.failingSince!).toBeGreaterThanOrEqual(1_000);
    expect((await worker.endpoints.get(name, 'down'))?.reason).toBe(failing.reason);

    // Disabled: the deliveries are held back, none dead-lettered.
    await expect.poll(() => deferred.length, { timeout: 10_000 }).toBeGreaterThanOrEqual(3);
    expect(events.all('job:dead-lettered')).toHaveLength(1);

    up = true;
    await worker.endpoints.enable(name, 'down');
    const done = await events.waitForCount('job:completed', 3, () => true, 20_000);
    expect(done.map((e) => e.jobId).sort()).toEqual(['%7Edown/m-0', '%7Edown/m-1', '%7Edown/m-2']);
    expect(events.all('job:dead-lettered')).toHaveLength(1);
    // The streak ended with the success: nothing left per endpoint.
    await expect.poll(() => redis.keys(`requeue:{${name}}:failing:*`)).toEqual([]);

    const text = await metrics.registry.metrics();
    expect(text).toContain(`requeue_endpoints_disabled_total{queue="${name}",cause="failing"} 1`);
    expect(text).toContain(`requeue_endpoints_disabled_total{queue="${name}",cause="gone"} 1`);
  }, 60_000);

  it('refuses a bad autoDisable option in one line naming the field', () => {
    for (const [autoDisable, field] of [
      [{ afterMs: 10 }, 'autoDisable.afterMs'],
      [{ recheckMs: -1 }, 'autoDisable.recheckMs'],
      [{ after: 5 }, 'autoDisable'],
    ] as const) {
      const err = (() => {
        try {
          createWebhookWorker('never-started', {
            connection: redisUrl(),
            autoDisable: autoDisable as { afterMs?: number },
          });
        } catch (e) {
          return e;
        }
        return undefined;
      })();
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as Error).message).toContain(field);
      expect((err as Error).message).not.toContain('\n');
    }
  });
});
