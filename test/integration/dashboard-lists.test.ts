import { request as httpRequest } from 'node:http';
import { describe, expect, it } from 'vitest';
import { createWorker } from '../../src/scheduler/requeue-worker.js';
import { jobIdForKey } from '../../src/scheduler/job-id.js';
import { parseServiceConfig } from '../../workers/service/config.js';
import { startService } from '../../workers/service/service.js';
import { onCleanup } from '../harness/cleanup.js';
import { seedDead } from '../harness/dlq.js';
import { writesDuring } from '../harness/monitor.js';
import { WorkerEventLog } from '../harness/worker-events.js';
import { bullPrefixOf, cleanQueue, jobKey, redisUrl, uniqueQueueName } from '../harness/redis.js';
import {
  startListsFixture,
  logger,
  redis,
  name,
  other,
  otherQueue,
  ids,
  call,
  inDelayed,
  inWait,
  type Json,
} from './dashboard-lists-fixture.js';

/**
 * Issue 25, item 7: the dashboard's job lists, job view, delayed-job moves,
 * pause/resume, DLQ search and activity graph, through the admin API against
 * real Redis and a real requeue worker.
 */

// The handler is written here: the job view's stack names the file it threw in.
startListsFixture(async (job) => {
  if (job.name === 'flaky') throw Object.assign(new Error('HTTP 503 upstream'), { status: 503 });
  if (job.name === 'bad') throw Object.assign(new Error('HTTP 400 refused'), { status: 400 });
  return 'ok';
});

describe('job lists', () => {
  it('pages the waiting jobs in the order they will run, with a total that counts them all and keys decoded', async () => {
    const first = await call(`/queues/${name}/jobs?state=waiting&limit=2`);
    expect(first.status).toBe(200);
    expect(first.body.total).toBe(5);
    expect(first.body.items.map((j: Json) => j.key)).toEqual(['w:0', 'w:1']);
    expect(first.body.items[0].id).toBe(jobIdForKey('w:0'));
    const last = await call(`/queues/${name}/jobs?state=waiting&limit=2&offset=4`);
    expect(last.body.items.map((j: Json) => j.key)).toEqual(['w:4']);
  });

  it('lists delayed jobs soonest first, a retry told from a job merely added with a delay, each with its fence', async () => {
    const { body } = await call(`/queues/${name}/jobs?state=delayed`);
    expect(body.total).toBe(2);
    const retry = body.items.find((j: Json) => j.id === ids.retry);
    const scheduled = body.items.find((j: Json) => j.id === ids.scheduled);
    expect(retry).toMatchObject({ key: 'order:7', kind: 'retry', lastError: 'HTTP 503 upstream' });
    expect(scheduled).toMatchObject({ kind: 'scheduled', lastError: null });
    expect(retry.fence).toEqual({ score: expect.stringMatching(/^\d+$/), attemptsMade: 1 });
    expect(body.items[0].dueAt).toBeLessThanOrEqual(body.items[1].dueAt);
    // Redacted as the DLQ view redacts.
    expect(JSON.stringify(body)).not.toContain('hunter2');
  });

  it('lists completed and active jobs', async () => {
    const completed = await call(`/queues/${name}/jobs?state=completed`);
    expect(completed.body).toMatchObject({ total: 1, items: [{ id: ids.done, name: 'ok' }] });
    expect(completed.body.items[0].finishedAt).toEqual(expect.any(Number));
    expect((await call(`/queues/${name}/jobs?state=active`)).body.total).toBe(0);
  });

  it('refuses an unknown state naming the field, and an unknown queue with a 404', async () => {
    const bad = await call(`/queues/${name}/jobs?state=failed`);
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toMatch(/state/);
    expect((await call(`/queues/nope-${name}/jobs`)).status).toBe(404);
  });

  it('shows one job: data redacted, history, options, progress and its fence', async () => {
    const { body } = await call(`/queues/${name}/jobs/${encodeURIComponent('order:7')}`);
    expect(body).toMatchObject({
      id: ids.retry,
      key: 'order:7',
      where: 'delayed',
      delayKind: 'retry',
    });
    expect(body.history).toHaveLength(1);
    expect(body.opts).toEqual(expect.any(Object));
    expect(body).toHaveProperty('progress', null);
    expect(body.fence.attemptsMade).toBe(1);
    expect(JSON.stringify(body)).not.toContain('hunter2');
    // The failed attempt's stack, where the handler threw (requeue keeps it as
    // BullMQ's stacktrace; the view had none for requeue's own failures).
    expect(body.stack).toMatch(/^Error: HTTP 503 upstream\n\s+at .*dashboard-lists\.test\.ts/);
  });
});

describe('upcoming retries', () => {
  it('with only=retries, counts and lists retries, not jobs merely added with a delay', async () => {
    const { body } = await call(`/queues/${name}/schedule?horizon=hour&only=retries`);
    expect(body.due).toMatchObject({ overdue: 0, withinHour: 1, later: 0 });
    expect(body.upcoming).toEqual([
      expect.objectContaining({ id: ids.retry, key: 'order:7', kind: 'retry' }),
    ]);
    expect(body).toMatchObject({ notRetries: 1, partial: false });
    // The default still counts every delayed job.
    expect((await call(`/queues/${name}/schedule?horizon=day`)).body.due.withinDay).toBe(2);
  });
});

describe('moves of a delayed job', () => {
  it('retry-now moves the retry to the front of the wait list; the same fence again refuses', async () => {
    const { body } = await call(`/queues/${name}/jobs/${encodeURIComponent(ids.retry!)}`);
    const fence = body.fence;
    const wrong = { ...fence, attemptsMade: fence.attemptsMade + 1 };
    const refused = await call(
      `/queues/${name}/delayed/${encodeURIComponent(ids.retry!)}/retry-now`,
      {
        method: 'POST',
        body: wrong,
      },
    );
    expect(refused.status).toBe(409);
    expect(await inDelayed(ids.retry!)).toBe(true);
    const moved = await call(
      `/queues/${name}/delayed/${encodeURIComponent(ids.retry!)}/retry-now`,
      {
        method: 'POST',
        body: fence,
      },
    );
    expect(moved.status).toBe(200);
    expect(await inDelayed(ids.retry!)).toBe(false);
    expect(await inWait(ids.retry!)).toBe(true);
    const waiting = await call(`/queues/${name}/jobs?state=waiting&limit=1`);
    expect(waiting.body.items[0].id).toBe(ids.retry);

    // A delete with the fence read before the move: the job moved on, so it refuses and keeps it.
    const stale = await call(`/queues/${name}/delayed/${encodeURIComponent(ids.retry!)}/delete`, {
      method: 'POST',
      body: fence,
    });
    expect(stale.status).toBe(409);
    expect(stale.body.error).toMatch(/not delayed any more; nothing was changed/);
    expect(await redis.exists(jobKey(redis, name, ids.retry!))).toBe(1);
    expect(await inWait(ids.retry!)).toBe(true);
  });

  it('delete removes a delayed job as read, and nothing of another', async () => {
    const { body } = await call(`/queues/${name}/jobs/${ids.scheduled}`);
    const res = await call(`/queues/${name}/delayed/${ids.scheduled}/delete`, {
      method: 'POST',
      body: body.fence,
    });
    expect(res.status).toBe(200);
    expect(await inDelayed(ids.scheduled!)).toBe(false);
    expect(await redis.exists(jobKey(redis, name, ids.scheduled!))).toBe(0);
    // An id naming one of BullMQ's keys is not a delayed job: nothing happens.
    const meta = await call(`/queues/${name}/delayed/meta/delete`, {
      method: 'POST',
      body: { score: '1', attemptsMade: 0 },
    });
    expect(meta.status).toBe(409);
    expect(await redis.exists(`${bullPrefixOf(redis, name)}:${name}:meta`)).toBe(1);
  });
});

describe('a delayed job that ran again meanwhile', () => {
  it('a delete with the fence read before its last attempt refuses: the job is delayed again, with newer state, and stays', async () => {
    const worker = createWorker(
      other,
      async () => {
        throw Object.assign(new Error('HTTP 503'), { status: 503 });
      },
      {
        connection: redisUrl(),
        logger,
        policy: { strategy: 'fixed', baseMs: 600_000, capMs: 600_000, maxAttempts: 5 },
      },
    );
    const events = new WorkerEventLog(worker);
    onCleanup(() => worker.close({ timeoutMs: 5_000 }));
    const { id } = await otherQueue.add('sync', {});
    await events.waitFor('retry:scheduled', (e) => e.jobId === id && e.attempt === 1);
    const before = (await call(`/queues/${other}/jobs/${encodeURIComponent(id)}`)).body.fence;
    expect(before.attemptsMade).toBe(1);
    // Run now: the worker takes it, it fails again and is delayed again.
    const path = `/queues/${other}/delayed/${encodeURIComponent(id)}`;
    expect((await call(`${path}/retry-now`, { method: 'POST', body: before })).status).toBe(200);
    await events.waitFor('retry:scheduled', (e) => e.jobId === id && e.attempt === 2);
    const stale = await call(`${path}/delete`, { method: 'POST', body: before });
    expect(stale.status).toBe(409);
    expect(stale.body).toMatchObject({ result: 'changed' });
    expect(await redis.zscore(`${bullPrefixOf(redis, other)}:${other}:delayed`, id)).not.toBeNull();
    expect(await redis.exists(jobKey(redis, other, id))).toBe(1);
    // With the fence read now, it goes.
    const now = (await call(`/queues/${other}/jobs/${encodeURIComponent(id)}`)).body.fence;
    expect(now.attemptsMade).toBe(2);
    expect((await call(`${path}/delete`, { method: 'POST', body: now })).status).toBe(200);
    expect(await redis.exists(jobKey(redis, other, id))).toBe(0);
  });
});

describe('pause and resume', () => {
  it('pauses the queue as BullMQ does (the flag workers honour) and resumes it', async () => {
    const meta = `${bullPrefixOf(redis, name)}:${name}:meta`;
    expect((await call(`/queues/${name}/pause`, { method: 'POST' })).body.paused).toBe(true);
    expect(await redis.hexists(meta, 'paused')).toBe(1);
    expect((await call(`/queues/${name}/jobs`)).body.paused).toBe(true);
    expect((await call(`/queues/${name}/resume`, { method: 'POST' })).body.paused).toBe(false);
    expect(await redis.hexists(meta, 'paused')).toBe(0);
  });
});

describe('DLQ search', () => {
  it('finds dead jobs by error message or payload, paged, and never by a redacted secret', async () => {
    const now = Date.now();
    const base = {
      name: 'deliver',
      opts: {},
      reason: 'permanent-error' as const,
      attempts: 1,
      history: [],
      deadAt: now,
      replays: 0,
    };
    await seedDead(redis, {
      ...base,
      source: name,
      id: 's1',
      message: 'connect ETIMEDOUT 10.0.0.1',
      data: { order: 'A-1' },
    });
    await seedDead(redis, {
      ...base,
      source: name,
      id: 's2',
      message: 'HTTP 500',
      data: { order: 'B-2', password: 'sesame-sesame-42' },
    });
    await seedDead(redis, {
      ...base,
      source: name,
      id: 's3',
      message: 'HTTP 500 again',
      data: { order: 'C-3' },
    });
    const byMessage = await call(`/queues/${name}/dlq-search?q=etimedout`);
    expect(byMessage.body).toMatchObject({ total: 1, complete: true, items: [{ id: 's1' }] });
    const byPayload = await call(`/queues/${name}/dlq-search?q=B-2`);
    expect(byPayload.body.items.map((d: Json) => d.id)).toEqual(['s2']);
    expect(JSON.stringify(byPayload.body)).not.toContain('sesame');
    expect((await call(`/queues/${name}/dlq-search?q=sesame`)).body.total).toBe(0);
    const paged = await call(`/queues/${name}/dlq-search?q=HTTP%20500&limit=1&offset=1`);
    expect(paged.body.total).toBe(2);
    expect(paged.body.items).toHaveLength(1);
  });
});

describe('activity', () => {
  it('counts completions, retries and deaths per minute from the event stream, not a delayed add', async () => {
    const { body } = await call(`/queues/${name}/activity?minutes=10`);
    const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
    expect(body.binMs).toBe(60_000);
    expect(body.completed).toHaveLength(10);
    expect(sum(body.completed)).toBe(1);
    expect(sum(body.retried)).toBe(1);
    expect(sum(body.dead)).toBe(1);
  });
});

describe('looking never writes', () => {
  it('every new GET route sends no write command', async () => {
    const paths = [
      ...['waiting', 'active', 'delayed', 'completed'].map(
        (s) => `/queues/${name}/jobs?state=${s}`,
      ),
      `/queues/${name}/jobs/${ids.done}`,
      `/queues/${name}/dlq-search?q=http`,
      `/queues/${name}/activity`,
      `/queues/${name}/schedule?only=retries`,
    ];
    const writes = await writesDuring(redis, name, async () => {
      for (const path of paths) expect((await call(path)).status, path).toBe(200);
    });
    expect(writes).toEqual([]);
  });
});

describe('the new routes answer only their own origin', () => {
  it('a rebinding Host cannot list jobs; a cross-site POST cannot pause a queue or move a job', async () => {
    const hooks = uniqueQueueName('dash-site');
    const service = await startService(
      parseServiceConfig({ port: 0, redisUrl: redisUrl(), webhooks: { queue: hooks } }, {}),
      logger,
    );
    onCleanup(async () => {
      await service.stop();
      await cleanQueue(redis, hooks);
    });
    const port = new URL(service.url).port;
    const raw = (method: string, path: string, headers: Record<string, string>) =>
      new Promise<number>((resolve, reject) => {
        const req = httpRequest(
          {
            hostname: '127.0.0.1',
            port,
            method,
            path,
            headers: { ...headers, connection: 'close' },
          },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          },
        );
        req.on('error', reject);
        req.end();
      });
    expect(
      await raw('GET', `/admin/queues/${hooks}/jobs`, { host: `attacker.example:${port}` }),
    ).toBe(421);
    expect(await raw('GET', `/admin/queues/${hooks}/jobs`, { host: `127.0.0.1:${port}` })).toBe(
      200,
    );
    for (const path of [
      `/admin/queues/${hooks}/pause`,
      `/admin/queues/${hooks}/delayed/x/delete`,
    ]) {
      const status = await raw('POST', path, {
        host: `127.0.0.1:${port}`,
        origin: 'http://attacker.example',
        'sec-fetch-site': 'cross-site',
        'sec-fetch-mode': 'no-cors',
      });
      expect(status, path).toBe(403);
    }
    expect(await redis.hexists(`${bullPrefixOf(redis, hooks)}:${hooks}:meta`, 'paused')).toBe(0);
  });
});
