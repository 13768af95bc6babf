import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RequeueMetrics } from '../../src/scheduler/metrics.js';
import { createQueue } from '../../src/scheduler/queue.js';
import { enqueueWebhook } from '../../workers/webhook/index.js';
import { spawnTs, type TsChild } from '../harness/child.js';
import { onCleanup } from '../harness/cleanup.js';
import { promtoolCheck, sample } from '../harness/promtool.js';
import {
  cleanedQueueName,
  cleanQueue,
  connect,
  redisUrl,
  startRedisServer,
  uniqueQueueName,
} from '../harness/redis.js';

/**
 * Issue 11, part 1: every requeue process serves `/metrics` — `requeue worker
 * --metrics-port`, the webhook worker's `METRICS_PORT` — as real child
 * processes, scraped over HTTP, checked by `promtool check metrics` (a
 * finding fails the test) and by what the numbers say.
 */

const PROCESS_TIMEOUT_MS = 60_000;

let redis: Redis;
beforeAll(() => {
  redis = connect();
});
afterAll(() => {
  redis.disconnect();
});

/** Starts a process that logs (pino, JSON lines) and waits for its "metrics served" line. */
async function startServing(
  script: string,
  args: string[],
  env: Record<string, string>,
): Promise<{ child: TsChild; url: string }> {
  const child = spawnTs(script, args, { LOG_LEVEL: 'info', ...env });
  onCleanup(() => child.kill('SIGKILL'));
  const started = Date.now();
  for (;;) {
    const url = /"url":"(http:\/\/[^"]+\/metrics)"/.exec(child.stdout())?.[1];
    if (url) return { child, url };
    if (child.proc.exitCode !== null || Date.now() - started > PROCESS_TIMEOUT_MS / 2)
      throw new Error(`${script} serves no metrics; stderr: ${child.stderr().slice(-500)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function scrape(url: string): Promise<string> {
  const res = await fetch(url);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return res.text();
}

/** Scrapes until `done(text)`: the other process's work is seen only through its metrics. */
async function scrapeUntil(url: string, done: (text: string) => boolean): Promise<string> {
  const started = Date.now();
  for (;;) {
    const text = await scrape(url);
    if (done(text)) return text;
    if (Date.now() - started > PROCESS_TIMEOUT_MS / 2)
      throw new Error(`metrics never got there; last scrape:\n${text.slice(0, 3000)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function expectPromtoolClean(text: string): Promise<void> {
  const checked = await promtoolCheck(text);
  expect(checked.output).toBe('');
  expect(checked.code).toBe(0);
}

describe('a scrape while Redis does not answer', () => {
  it('returns within the read timeout, without the queue gauges, with the process metrics', async () => {
    const server = await startRedisServer({ port: 7343 });
    onCleanup(() => server.stop());
    const connection = connect(server.url);
    onCleanup(() => connection.disconnect());
    const queue = createQueue('frozen', { connection });
    await queue.add('job', {});
    const metrics = new RequeueMetrics(undefined, { readTimeoutMs: 300 });
    metrics.watchQueue(queue);
    expect(sample((await metrics.render()).body, 'requeue_jobs', { state: 'waiting' })).toBe(1);

    server.signal('SIGSTOP');
    onCleanup(() => server.signal('SIGCONT'));
    const started = Date.now();
    const { body } = await metrics.render();
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(sample(body, 'requeue_jobs', { state: 'waiting' })).toBeUndefined();
    expect(sample(body, 'process_cpu_user_seconds_total')).toBeGreaterThan(0);
    await expectPromtoolClean(body);
    server.signal('SIGCONT');
    await queue.close();
  });
});

describe('metrics in every process', () => {
  it(
    'requeue worker --metrics-port: counts, histograms and gauges, promtool-clean, closed at SIGTERM',
    { timeout: PROCESS_TIMEOUT_MS * 2 },
    async () => {
      const name = cleanedQueueName(redis, 'metrics-cli');
      const { child, url } = await startServing(
        'src/cli/main.ts',
        [
          'worker',
          name,
          '--handler',
          'examples/flaky-handler.mjs',
          '--concurrency',
          '4',
          '--policy',
          '{"strategy":"fixed","baseMs":100,"capMs":100,"maxAttempts":4}',
          '--breaker',
          '{}',
          '--budget',
          '{}',
          '--shutdown-timeout-ms',
          '3000',
          '--metrics-port',
          '0',
          '--redis',
          redisUrl(),
        ],
        {},
      );
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
      const queue = createQueue(name, { connection: redis });
      onCleanup(() => queue.close());
      await queue.add('ok', {});
      await queue.add('flaky', { fail: 'transient', times: 2 });
      await queue.add('bad', { fail: 'permanent' });

      const q = { queue: name };
      const text = await scrapeUntil(
        url,
        (t) =>
          sample(t, 'requeue_jobs_completed_total', q) === 2 &&
          sample(t, 'requeue_jobs_dead_lettered_total', q) === 1,
      );
      // One job done at its first attempt, one at its third.
      expect(sample(text, 'requeue_job_attempts_count', q)).toBe(2);
      expect(sample(text, 'requeue_job_attempts_sum', q)).toBe(4);
      expect(sample(text, 'requeue_job_attempts_bucket', { ...q, le: '1' })).toBe(1);
      expect(sample(text, 'requeue_job_attempts_bucket', { ...q, le: '2' })).toBe(1);
      expect(sample(text, 'requeue_job_attempts_bucket', { ...q, le: '3' })).toBe(2);
      // Enqueue to completion: the flaky job waited two 100 ms retries.
      expect(sample(text, 'requeue_job_latency_seconds_count', q)).toBe(2);
      expect(sample(text, 'requeue_job_latency_seconds_sum', q)).toBeGreaterThanOrEqual(0.2);
      // Its two retries started, each measured against its due time.
      expect(sample(text, 'requeue_retry_lateness_seconds_count', q)).toBe(2);
      expect(sample(text, 'requeue_retry_lateness_seconds_sum', q)).toBeGreaterThanOrEqual(0);
      expect(sample(text, 'requeue_retry_lateness_seconds_bucket', { ...q, le: '+Inf' })).toBe(2);
      // Gauges, read from Redis at the scrape.
      expect(sample(text, 'requeue_dlq_jobs', q)).toBe(1);
      expect(sample(text, 'requeue_jobs', { ...q, state: 'dead' })).toBe(1);
      expect(sample(text, 'requeue_jobs', { ...q, state: 'completed' })).toBe(2);
      expect(sample(text, 'requeue_breaker_state', { ...q, state: 'closed' })).toBe(1);
      expect(sample(text, 'requeue_breaker_state', { ...q, state: 'open' })).toBe(0);
      for (const state of ['closed', 'open', 'half-open'])
        expect(sample(text, 'requeue_breaker_keys', { ...q, state })).toBe(0);
      // Two retries took 5 tokens each; successes give back at most 1 + 5 (by when they flush).
      expect(sample(text, 'requeue_budget_tokens', q)).toBeGreaterThanOrEqual(490);
      expect(sample(text, 'requeue_budget_tokens', q)).toBeLessThanOrEqual(496);
      // prom-client's process metrics.
      expect(sample(text, 'process_cpu_user_seconds_total')).toBeGreaterThan(0);
      expect(sample(text, 'nodejs_eventloop_lag_seconds')).toBeGreaterThanOrEqual(0);
      await expectPromtoolClean(text);
      // Only /metrics is served.
      expect((await fetch(url.replace('/metrics', '/'))).status).toBe(404);

      // A scraper's keep-alive connection does not hold the shutdown up.
      await scrape(url);
      const stopping = Date.now();
      const exit = await child.kill('SIGTERM');
      expect(Date.now() - stopping).toBeLessThan(3_000);
      expect(exit).toEqual({ code: 0, signal: null });
      await expect(fetch(url)).rejects.toThrow();
    },
  );

  it(
    'the webhook worker with METRICS_PORT: its endpoints counted by breaker state, promtool-clean',
    { timeout: PROCESS_TIMEOUT_MS * 2 },
    async () => {
      const name = cleanedQueueName(redis, 'metrics-hooks');
      let calls = 0;
      const receiver = createServer((_req, res) => {
        calls += 1;
        res.writeHead(calls === 1 ? 503 : 204).end();
      });
      await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
      onCleanup(() => new Promise((resolve) => receiver.close(resolve)));
      const { child, url } = await startServing('workers/webhook/main.ts', [], {
        REDIS_URL: redisUrl(),
        WEBHOOK_QUEUE: name,
        WEBHOOK_ALLOW_PRIVATE: 'true',
        METRICS_PORT: '0',
      });
      const queue = createQueue(name, { connection: redis, policy: { baseMs: 50, capMs: 50 } });
      onCleanup(() => queue.close());
      const port = (receiver.address() as AddressInfo).port;
      await enqueueWebhook(queue, {
        endpoint: { id: 'ep_metrics', url: `http://127.0.0.1:${port}/hook` },
        event: { id: 'evt_1', type: 'test', payload: {} },
      });

      const q = { queue: name };
      const text = await scrapeUntil(
        url,
        (t) =>
          sample(t, 'requeue_jobs_completed_total', q) === 1 &&
          sample(t, 'requeue_breaker_keys', { ...q, state: 'closed' }) === 1,
      );
      expect(sample(text, 'requeue_job_attempts_sum', q)).toBe(2);
      expect(sample(text, 'requeue_retry_lateness_seconds_count', q)).toBe(1);
      expect(sample(text, 'requeue_breaker_keys', { ...q, state: 'open' })).toBe(0);
      // No per-endpoint label anywhere.
      expect(text).not.toContain('ep_metrics');
      expect(sample(text, 'process_resident_memory_bytes')).toBeGreaterThan(0);
      await expectPromtoolClean(text);
      expect(await child.kill('SIGTERM')).toEqual({ code: 0, signal: null });
    },
  );

  it(
    'the stream worker with METRICS_PORT: its retry queue counted, promtool-clean',
    { timeout: PROCESS_TIMEOUT_MS * 2 },
    async () => {
      const stream = uniqueQueueName('metrics-stream');
      const group = 'billing';
      const retryQueue = `${stream}.${group}.retry`;
      onCleanup(() => cleanQueue(redis, retryQueue));
      onCleanup(() => redis.del(stream, `${stream}:counts`));
      const { child, url } = await startServing('workers/stream/main.ts', [], {
        REDIS_URL: redisUrl(),
        STREAM: stream,
        GROUP: group,
        HANDLER: 'test/fixtures/stream-counting-handler.ts',
        START_ID: '0',
        BLOCK_MS: '100',
        POLICY: JSON.stringify({ strategy: 'fixed', baseMs: 50, capMs: 50, maxAttempts: 3 }),
        METRICS_PORT: '0',
      });
      // Fails its stream attempt: handed to the retry queue, whose worker runs it again.
      await redis.xadd(stream, '*', 'n', '1', 'fail', '1');
      const q = { queue: retryQueue };
      const text = await scrapeUntil(
        url,
        (t) => sample(t, 'requeue_jobs_completed_total', q) === 1,
      );
      expect(sample(text, 'requeue_job_attempts_count', q)).toBe(1);
      expect(sample(text, 'requeue_jobs', { ...q, state: 'completed' })).toBe(1);
      expect(sample(text, 'requeue_dlq_jobs', q)).toBe(0);
      await expectPromtoolClean(text);
      expect(await child.kill('SIGTERM')).toEqual({ code: 0, signal: null });
    },
  );

  it(
    'a metrics port that cannot be used is one line naming the setting, exit code 2',
    { timeout: PROCESS_TIMEOUT_MS },
    async () => {
      const name = cleanedQueueName(redis, 'metrics-bad');
      const taken = createServer();
      await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
      onCleanup(() => new Promise((resolve) => taken.close(resolve)));
      const port = String((taken.address() as AddressInfo).port);

      const cli = spawnTs('src/cli/main.ts', [
        'worker',
        name,
        '--handler',
        'examples/flaky-handler.mjs',
        '--metrics-port',
        '70000',
        '--redis',
        redisUrl(),
      ]);
      expect(await cli.exited).toEqual({ code: 2, signal: null });
      expect(cli.stderr()).toBe('requeue: --metrics-port: must be ≤ 65535, got 70000\n');

      const hooks = spawnTs('workers/webhook/main.ts', [], {
        REDIS_URL: redisUrl(),
        WEBHOOK_QUEUE: name,
        METRICS_PORT: port,
      });
      onCleanup(() => hooks.kill('SIGKILL'));
      expect(await hooks.exited).toEqual({ code: 2, signal: null });
      expect(hooks.stderr()).toBe(
        `requeue-webhooks: env.METRICS_PORT: cannot listen on 127.0.0.1:${port} (EADDRINUSE)\n`,
      );
    },
  );
});
