import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { EndpointStore } from '../../src/redis/endpoint-store.js';
import { createQueue } from '../../src/scheduler/queue.js';
import { ManualClock } from '../../src/util/fake-clock.js';
import { enqueueWebhook } from '../../workers/webhook/index.js';
import { cleanQueue, connect, redisUrl, uniqueQueueName } from '../harness/redis.js';
import { onCleanup } from '../harness/cleanup.js';
import { repoRoot } from '../harness/child.js';
import { newSecret, startReceiver, webhookJob } from './webhook-helpers.js';

/**
 * The webhook worker's endpoint store (its cache, and "disabled" confirmed
 * before acting), and workers/webhook/main.ts as a process (delivery itself is
 * in `webhook.test.ts`).
 */

afterEach(() => {
  vi.restoreAllMocks();
});

describe('the endpoint store', () => {
  it('answers from a cache for up to cacheTtlMs, but confirms "disabled" before acting on it', async () => {
    const name = uniqueQueueName('endpoints');
    const clock = new ManualClock(1_700_000_000_000);
    const cached = new EndpointStore({ connection: redisUrl(), clock, cacheTtlMs: 1000 });
    const other = new EndpointStore({ connection: redisUrl(), cacheTtlMs: 0 });
    onCleanup(async () => {
      await cached.close();
      await other.close();
      const redis = connect();
      await cleanQueue(redis, name);
      redis.disconnect();
    });

    expect(await cached.isDisabled(name, 'ep')).toBe(false);
    expect(await other.disable(name, 'ep', 'elsewhere', 42)).toBe(true);
    // Disabled elsewhere: not seen until the copy is older than the TTL.
    expect(await cached.isDisabled(name, 'ep')).toBe(false);
    clock.advance(1000);
    expect(await cached.get(name, 'ep')).toEqual({
      endpointId: 'ep',
      reason: 'elsewhere',
      disabledAt: 42,
    });
    // Enabled elsewhere: seen at once, since "disabled" is always confirmed.
    expect(await other.enable(name, 'ep')).toBe(true);
    expect(await cached.isDisabled(name, 'ep')).toBe(false);
    expect(await other.enable(name, 'ep')).toBe(false);
    // Disabled here: seen here at once.
    expect(await cached.disable(name, 'ep', 'here')).toBe(true);
    expect(await cached.isDisabled(name, 'ep')).toBe(true);
    expect(await cached.disable(name, 'ep', 'again')).toBe(false);
    expect(await other.list(name)).toEqual([
      { endpointId: 'ep', reason: 'again', disabledAt: clock.now() },
    ]);
  });
});

describe('workers/webhook/main.ts', () => {
  it('delivers, then drains and exits 0 on SIGTERM', async () => {
    const secret = newSecret();
    const receiver = await startReceiver(secret);
    onCleanup(receiver.close);
    const name = uniqueQueueName('webhook-main');
    const queue = createQueue(name, { connection: redisUrl() });
    onCleanup(async () => {
      await queue.close();
      const redis = connect();
      await cleanQueue(redis, name);
      redis.disconnect();
    });

    const child = spawn(process.execPath, ['--import', 'tsx', 'workers/webhook/main.ts'], {
      cwd: repoRoot,
      env: {
        ...process.env,
        REDIS_URL: redisUrl(),
        WEBHOOK_QUEUE: name,
        WEBHOOK_CONCURRENCY: '2',
        WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
        LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = once(child, 'exit');
    let output = '';
    const started = new Promise<void>((resolve) => {
      child.stdout.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('webhook worker started')) resolve();
      });
    });
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    await Promise.race([started, exited.then(() => Promise.reject(new Error(output)))]);

    const request = receiver.nextRequest();
    await enqueueWebhook(queue, webhookJob(receiver.url, secret));
    expect((await request).valid).toBe(true);

    child.kill('SIGTERM');
    const [code] = await exited;
    expect(code).toBe(0);
    expect(output).toContain('draining');
    expect(output).toContain('stopped');
    expect(output).not.toContain(secret.slice('whsec_'.length));
  });

  it('exits 2 naming a bad variable', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'workers/webhook/main.ts'], {
      cwd: repoRoot,
      env: { ...process.env, REDIS_URL: redisUrl(), WEBHOOK_CONCURRENCY: 'many' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const [code] = await once(child, 'exit');
    expect(code).toBe(2);
    expect(stderr).toContain('env.WEBHOOK_CONCURRENCY');
  });
});
