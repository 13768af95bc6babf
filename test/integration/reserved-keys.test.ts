/**
 * Issue 21, part 1: an idempotency key equal to one of BullMQ's key names
 * (`wait`, `meta`, `id`…) was written over the queue's key of that name. Every
 * BullMQ key name of the installed version and every requeue key name goes in
 * as a key through each entry point (library, CLI, service intake, webhook
 * intake), one queue per entry point; then a normal job completes and every
 * BullMQ key of the queue still has its type.
 */
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { PermanentError } from '../../src/errors/permanent-error.js';
import { bullPrefix } from '../../src/redis/keys.js';
import { DeadLetterQueue } from '../../src/scheduler/dlq/dead-letter-queue.js';
import { jobIdForKey, legacyJobIdForKey } from '../../src/scheduler/job-id.js';
import { readLiveJob } from '../../src/scheduler/bullmq/bull-reads.js';
import { createQueue } from '../../src/scheduler/queue.js';
import { createWorker, type Handler } from '../../src/scheduler/requeue-worker.js';
import { parseServiceConfig } from '../../workers/service/config.js';
import { startService } from '../../workers/service/service.js';
import { onCleanup } from '../harness/cleanup.js';
import { cli } from '../harness/cli.js';
import { seedDead } from '../harness/dlq.js';
import { cleanQueue, connect, onCluster, redisUrl, uniqueQueueName } from '../harness/redis.js';
import { overwrittenKeys, reservedNames } from '../harness/reserved-names.js';

const logger = createLogger({ level: 'silent' });
const redis = connect();
afterAll(() => redis.disconnect());
const names = reservedNames();
const fast = { strategy: 'fixed', baseMs: 10, capMs: 10, maxAttempts: 2 } as const;

/** Every reserved name under the queue's BullMQ prefix: BullMQ's type, or nothing at all. */
async function expectBullKeysIntact(queue: string): Promise<void> {
  const base = `${bullPrefix(queue, onCluster())}:${queue}:`;
  expect(await overwrittenKeys(redis, base)).toEqual([]);
  const pipeline = redis.pipeline();
  for (const name of ['meta', 'id', 'events', 'completed']) pipeline.type(base + name);
  const types = ((await pipeline.exec()) ?? []).map(([, t]) => String(t));
  // The keys a working queue always has are there, with their types.
  expect(types).toEqual(['hash', 'string', 'stream', 'zset']);
}

function setup(prefix: string, handler: Handler<unknown, unknown> = async () => 'ok') {
  const name = uniqueQueueName(prefix);
  const queue = createQueue(name, { connection: redisUrl() });
  const dlq = new DeadLetterQueue(name, { connection: redisUrl(), logger });
  const worker = createWorker(name, handler, {
    connection: redisUrl(),
    logger,
    policy: fast,
    concurrency: 8,
  });
  onCleanup(async () => {
    await worker.close({ timeoutMs: 5_000 });
    await dlq.close();
    await queue.close();
    await cleanQueue(redis, name);
  });
  const completed = async () => (await queue.counts()).completed;
  return { name, queue, dlq, worker, completed };
}

describe('a job key equal to one of BullMQ’s or requeue’s key names', () => {
  it('through the library (add, addBulk, the same key again) does not overwrite BullMQ’s keys; every job completes', async () => {
    const { name, queue, completed } = setup('rk-lib');
    const half = Math.ceil(names.length / 2);
    for (const key of names.slice(0, half)) {
      const job = await queue.add('job', { key }, { idempotencyKey: key });
      expect(job).toEqual({ id: jobIdForKey(key), name: 'job', key });
    }
    const bulk = await queue.addBulk(
      names
        .slice(half)
        .map((key) => ({ name: 'job', data: { key }, opts: { idempotencyKey: key } })),
    );
    expect(bulk.map((j) => j.key)).toEqual(names.slice(half));
    // The same keys again: no-ops that find their jobs.
    for (const key of ['wait', 'meta', 'id'])
      expect((await queue.add('job', {}, { idempotencyKey: key })).id).toBe(jobIdForKey(key));
    await queue.add('normal', { n: 1 });
    await expect.poll(completed, { timeout: 20_000 }).toBe(names.length + 1);
    expect(await queue.counts()).toMatchObject({ waiting: 0, active: 0, failed: 0, dead: 0 });
    await expectBullKeysIntact(name);
    // Found by the same key afterwards.
    const live = await readLiveJob(redis, name, jobIdForKey('meta'), bullPrefix(name, onCluster()));
    expect(live).toMatchObject({ where: 'completed', data: { key: 'meta' } });
  });

  it('through the CLI (`enqueue --id`, then `dlq show`/`replay --id` by the key) does not overwrite BullMQ’s keys', async () => {
    let dying = true;
    const { name, completed } = setup('rk-cli', async (job) => {
      if (dying && (job.data as { die?: boolean }).die) throw new PermanentError('not now');
      return 'ok';
    });
    for (const key of names) {
      const data = JSON.stringify({ key, die: key === 'wait' || key === 'dead' });
      const { code, stdout } = await cli('enqueue', name, '--data', data, '--id', key, '--json');
      expect(code, key).toBe(0);
      expect(JSON.parse(stdout)).toEqual({ queue: name, id: jobIdForKey(key), name: 'job', key });
    }
    const text = await cli('enqueue', name, '--data', '{}', '--id', 'invoice:42');
    expect(text.stdout).toBe(
      `enqueued job as ${jobIdForKey('invoice:42')} (key invoice:42) on ${name}\n`,
    );
    expect((await cli('enqueue', name, '--data', '{}')).code).toBe(0);
    await expect.poll(completed, { timeout: 20_000 }).toBe(names.length);
    for (const key of ['wait', 'dead']) {
      const shown = await cli('dlq', 'show', name, key, '--json');
      expect(shown.code).toBe(0);
      expect(JSON.parse(shown.stdout)).toMatchObject({ id: jobIdForKey(key), idempotencyKey: key });
    }
    dying = false;
    for (const key of ['wait', 'dead'])
      expect((await cli('dlq', 'replay', name, '--id', key)).code).toBe(0);
    await expect.poll(completed, { timeout: 20_000 }).toBe(names.length + 2);
    await expectBullKeysIntact(name);
  });

  it('through the service’s intake and the webhook intake (event ids) does not overwrite BullMQ’s keys; the admin API finds jobs by key', async () => {
    const jobQueue = uniqueQueueName('rk-svc');
    const hookQueue = uniqueQueueName('rk-hook');
    const delivered: string[] = [];
    const receiver = createServer((req: IncomingMessage, res) => {
      delivered.push(String(req.headers['webhook-id']));
      req.resume().on('end', () => res.writeHead(204).end());
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const config = parseServiceConfig(
      {
        port: 0,
        redisUrl: redisUrl(),
        webhooks: { queue: hookQueue, allowPrivate: true, policy: fast },
        queues: [{ name: jobQueue, handler: 'examples/flaky-handler.mjs', concurrency: 8 }],
      },
      {},
    );
    const service = await startService(config, logger);
    onCleanup(async () => {
      await service.stop();
      receiver.close();
      await cleanQueue(redis, jobQueue);
      await cleanQueue(redis, hookQueue);
    });
    const post = async (path: string, body: unknown) => {
      const res = await fetch(`${service.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    const hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    for (const key of names) {
      const job = await post(`/v1/jobs/${jobQueue}`, { data: { key }, idempotencyKey: key });
      expect(job).toEqual({ status: 202, body: { queue: jobQueue, id: jobIdForKey(key), key } });
      const hook = await post('/v1/webhooks', {
        endpoint: { id: 'ep', url: hookUrl },
        event: { id: key, type: 'reserved.name', payload: { key } },
      });
      expect(hook.status, key).toBe(202);
    }
    await post(`/v1/jobs/${jobQueue}`, { data: {} });
    await post('/v1/webhooks', {
      endpoint: { id: 'ep', url: hookUrl },
      event: { id: 'normal', type: 'normal', payload: {} },
    });
    const counts = (queue: string) =>
      fetch(`${service.url}/admin/queues/${queue}`).then(
        async (r) => ((await r.json()) as { counts: { completed: number } }).counts.completed,
      );
    await expect.poll(() => counts(jobQueue), { timeout: 30_000 }).toBe(names.length + 1);
    await expect.poll(() => counts(hookQueue), { timeout: 30_000 }).toBe(names.length + 1);
    expect(new Set(delivered)).toEqual(new Set([...names, 'normal']));
    await expectBullKeysIntact(jobQueue);
    await expectBullKeysIntact(hookQueue);
    // The admin API finds a job by its key; a name that is no job's key is a 404, never BullMQ's key.
    for (const key of ['wait', 'meta', 'id', 'events']) {
      const view = await fetch(`${service.url}/admin/queues/${jobQueue}/jobs/${key}`);
      expect(view.status, key).toBe(200);
      expect(await view.json()).toMatchObject({ id: jobIdForKey(key), data: { key } });
      const none = await fetch(`${service.url}/admin/queues/${hookQueue}/jobs/${key}`);
      expect(none.status, key).toBe(404);
    }
  });

  it('a job stored before the upgrade (its key’s earlier id) is still found by its key, and replay moves it into the namespace', async () => {
    let dying = true;
    const { name, queue, dlq, completed } = setup('rk-legacy', async () => {
      if (dying) throw new PermanentError('not yet');
      return 'ok';
    });
    const legacy = legacyJobIdForKey('invoice:42');
    await queue.bull.add('job', { n: 1 }, {
      jobId: legacy,
      attempts: 1,
      rq: { key: 'invoice:42' },
    } as Parameters<typeof queue.bull.add>[2]);
    await expect
      .poll(async () => (await dlq.get('invoice:42'))?.id, { timeout: 10_000 })
      .toBe(legacy);
    dying = false;
    const replayed = await dlq.replay({ id: 'invoice:42' });
    expect(replayed.renamed).toEqual([{ from: legacy, to: jobIdForKey('invoice:42') }]);
    await expect.poll(completed, { timeout: 10_000 }).toBe(1);
    const prefix = bullPrefix(name, onCluster());
    expect(await readLiveJob(redis, name, jobIdForKey('invoice:42'), prefix)).toMatchObject({
      where: 'completed',
    });
  });

  it('a dead record named like a BullMQ key (left by the old defect) is replayed under its key’s id or a fresh one, never over BullMQ’s key', async () => {
    const { name, queue, dlq, completed } = setup('rk-old-dead');
    const base = { name: 'job', opts: {}, reason: 'permanent-error', message: 'x' } as const;
    const record = {
      ...base,
      attempts: 1,
      history: [],
      deadAt: Date.now(),
      replays: 0,
      source: name,
    };
    // Died now (an older death would be the workers' retention's to trim). `wait` died with its
    // key `wait`; `meta` was added straight to BullMQ under that id, keyless.
    await seedDead(redis, { ...record, id: 'wait', data: { n: 1 }, idempotencyKey: 'wait' });
    await seedDead(redis, { ...record, id: 'meta', data: { n: 2 } });
    const replayed = await dlq.replay({});
    expect(replayed.done).toBe(2);
    const renamed = new Map(replayed.renamed.map((r) => [r.from, r.to]));
    expect(renamed.get('wait')).toBe(jobIdForKey('wait'));
    expect(renamed.get('meta')).toMatch(/^[A-Z][-0-9A-Za-z_]{17}$/);
    await queue.add('normal', {});
    await expect.poll(completed, { timeout: 10_000 }).toBe(3);
    await expectBullKeysIntact(name);
  });
});
