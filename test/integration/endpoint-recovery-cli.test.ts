import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it, vi } from 'vitest';
import { runCli } from '../../src/cli/program.js';
import { createQueue } from '../../src/scheduler/queue.js';
import { createWebhookWorker, enqueueWebhook } from '../../workers/webhook/webhook-worker.js';
import { onCleanup } from '../harness/cleanup.js';
import { cleanedQueueName, connect, redisUrl } from '../harness/redis.js';
import { WorkerEventLog } from '../harness/worker-events.js';

/** Runs the CLI in this process, capturing stdout and stderr. */
async function requeue(...args: string[]) {
  let stdout = '';
  let stderr = '';
  const out = vi.spyOn(process.stdout, 'write').mockImplementation((c) => {
    stdout += String(c);
    return true;
  });
  const err = vi.spyOn(process.stderr, 'write').mockImplementation((c) => {
    stderr += String(c);
    return true;
  });
  try {
    const code = await runCli(['node', 'requeue', ...args, '--redis', redisUrl()]);
    return { code, stdout, stderr };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}

describe('requeue endpoint resend|recover, requeue retry-now', () => {
  it('resends a delivered message, previews and recovers dead deliveries, runs a retry now', async () => {
    const redis = connect();
    onCleanup(() => redis.quit());
    const name = cleanedQueueName(redis, 'ep-recover-cli');
    // /down answers 400 twice (dead at once), /later 503 once (a retry an hour away).
    const statuses = new Map([
      ['/down', [400, 400]],
      ['/later', [503]],
    ]);
    const hits: string[] = [];
    const server = createServer((req, res) => {
      req.resume();
      hits.push(`${req.url} ${String(req.headers['webhook-id'])}`);
      res.writeHead(statuses.get(req.url ?? '')?.shift() ?? 200).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    onCleanup(() => new Promise((resolve) => server.close(resolve)));
    const url = (path: string) =>
      `http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`;
    const queue = createQueue(name, { connection: redis });
    onCleanup(() => queue.close());
    const worker = createWebhookWorker(name, {
      connection: redis,
      allowPrivate: true,
      breaker: false,
      adaptiveConcurrency: false,
      policy: { strategy: 'fixed', baseMs: 3_600_000, capMs: 3_600_000, maxAttempts: 3 },
    });
    onCleanup(() => worker.close({ timeoutMs: 2_000 }));
    const events = new WorkerEventLog(worker);
    const send = (endpoint: string, path: string, id: string) =>
      enqueueWebhook(queue, {
        endpoint: { id: endpoint, url: url(path) },
        event: { id, type: 'order.paid', payload: { id } },
      });

    const delivered = await send('ep-ok', '/ok', 'm-ok');
    await events.waitFor('job:completed', (e) => e.jobId === delivered.id);
    // The older positional form and the --queue flag both work.
    const resent = await requeue('endpoint', 'resend', name, 'ep-ok', '--message', 'm-ok');
    expect(resent).toMatchObject({ code: 0 });
    expect(resent.stdout).toMatch(/^resent m-ok to ep-ok \(resend 1\): delivery /);
    const json = await requeue(
      'endpoint',
      'resend',
      'ep-ok',
      '--queue',
      name,
      '--message',
      'm-ok',
      '--json',
    );
    expect(JSON.parse(json.stdout)).toMatchObject({ endpointId: 'ep-ok', resend: 2 });
    await events.waitForCount('job:completed', 3);
    expect(hits.filter((h) => h === '/ok m-ok')).toHaveLength(3);
    const none = await requeue('endpoint', 'resend', name, 'ep-ok', '--message', 'm-none');
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/m-none/);

    await send('ep-down', '/down', 'm-d1');
    await send('ep-down', '/down', 'm-d2');
    await events.waitForCount('job:dead-lettered', 2);
    const preview = await requeue(
      'endpoint',
      'recover',
      'ep-down',
      '--queue',
      name,
      '--since',
      '0',
      '--dry-run',
    );
    expect(preview).toMatchObject({
      code: 0,
      stdout: '2 dead deliveries of ep-down would be recovered\n',
    });
    const recovered = await requeue(
      'endpoint',
      'recover',
      name,
      'ep-down',
      '--since',
      '0',
      '--json',
    );
    expect(JSON.parse(recovered.stdout)).toMatchObject({ dryRun: false, done: 2, total: 2 });
    await events.waitForCount('job:completed', 5);
    const bad = await requeue('endpoint', 'recover', 'ep-down', '--queue', name, '--since', 'soon');
    expect(bad).toMatchObject({ code: 2 });
    expect(bad.stderr).toMatch(/--since: expected an ISO date or milliseconds/);

    const later = await send('ep-later', '/later', 'm-later');
    await events.waitFor('retry:scheduled', (e) => e.jobId === later.id);
    const stale = await requeue('retry-now', name, later.id, '--attempt', '0');
    expect(stale.stdout).toBe(`${later.id} has moved on from that attempt; nothing done\n`);
    const now = await requeue('retry-now', name, later.id);
    expect(now).toMatchObject({ code: 0, stdout: `${later.id} is due now\n` });
    await events.waitFor('job:completed', (e) => e.jobId === later.id);
  });
});
