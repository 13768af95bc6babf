import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { webhookRetryPolicy } from '../../src/policy/webhook-policy.js';
import { createQueue } from '../../src/scheduler/queue.js';
import { createWebhookWorker, enqueueWebhook } from '../../workers/webhook/index.js';
import { onCleanup } from '../harness/cleanup.js';
import { cleanedQueueName, connect } from '../harness/redis.js';
import { WorkerEventLog } from '../harness/worker-events.js';

/** Time runs this many times faster in this test: 27.6 h of schedule is 9.9 s. */
const scale = 10_000;

/** The webhook default schedule, every delay divided by {@link scale} (jitter kept). */
const scaledPolicy = {
  ...webhookRetryPolicy,
  scheduleMs: webhookRetryPolicy.scheduleMs!.map((ms) => ms / scale),
  baseMs: webhookRetryPolicy.baseMs / scale,
  capMs: webhookRetryPolicy.capMs / scale,
};

describe('the default webhook schedule (scaled 1:10,000)', () => {
  it('loses nothing of a low-traffic endpoint down for 30 s, 10 min or 3 h', async () => {
    const outagesMs = { '30s': 30_000, '10min': 600_000, '3h': 10_800_000 };
    // Each endpoint goes down when its event first arrives.
    const downSince = new Map<string, number>();
    const attempts = new Map<string, number>();
    const server = createServer((req, res) => {
      const path = (req.url ?? '/').slice(1) as keyof typeof outagesMs;
      attempts.set(path, (attempts.get(path) ?? 0) + 1);
      if (!downSince.has(path)) downSince.set(path, performance.now());
      const down = performance.now() - downSince.get(path)! < outagesMs[path] / scale;
      req.resume();
      res.writeHead(down ? 503 : 200).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    onCleanup(() => new Promise((resolve) => server.close(resolve)));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

    const redis = connect();
    onCleanup(() => redis.quit());
    const name = cleanedQueueName(redis, 'schedule');
    const queue = createQueue(name, { connection: redis });
    onCleanup(() => queue.close());
    const worker = createWebhookWorker(name, {
      connection: redis,
      allowPrivate: true,
      policy: scaledPolicy,
      logger: pino({ level: 'silent' }),
    });
    onCleanup(() => worker.close({ timeoutMs: 2_000 }));
    const events = new WorkerEventLog(worker);
    for (const outage of Object.keys(outagesMs))
      await enqueueWebhook(queue, {
        endpoint: { id: `down-${outage}`, url: `${base}/${outage}` },
        event: { id: `evt-${outage}`, type: 'low.traffic', payload: { outage } },
      });

    await events.waitForCount('job:completed', 3, undefined, 30_000);
    expect(events.all('job:dead-lettered')).toEqual([]);
    // Each endpoint got its event after its outage ended, having been retried through it
    // (how many times depends on how late a sub-millisecond retry starts on this machine).
    for (const outage of Object.keys(outagesMs))
      expect(attempts.get(outage), outage).toBeGreaterThanOrEqual(2);
    // The 3 h outage outlasts the first six steps (1 s + 5 s + 30 s + 5 min + 30 min + 2 h ≈ 2.6 h).
    expect(attempts.get('3h')).toBeGreaterThanOrEqual(7);
  }, 40_000);
});
