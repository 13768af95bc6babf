import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ChannelModel, Channel } from 'amqplib';
import type { NatsConnection } from 'nats';
import { defaultAmqpRetryQueue } from '../../workers/amqp/index.js';
import { defaultNatsRetryQueue } from '../../workers/nats/index.js';
import { amqpTestChannel, amqpUrl, publishAll, queueCounts } from '../harness/amqp.js';
import { repoRoot } from '../harness/child.js';
import {
  consumerCounts,
  deleteStream,
  makeStream,
  natsTestConnection,
  natsUrl,
} from '../harness/nats.js';
import { cleanQueue, connect, redisUrl, uniqueQueueName } from '../harness/redis.js';

const handler = join(repoRoot, 'test/fixtures/consume-handler.mjs');
const policy = '{"strategy":"fixed","baseMs":50,"capMs":50,"maxAttempts":3}';
const redis = connect();
const dir = mkdtempSync(join(tmpdir(), 'requeue-consume-'));
let model: ChannelModel;
let channel: Channel;
let nc: NatsConnection;
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  ({ model, channel } = await amqpTestChannel());
  nc = await natsTestConnection();
});
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});
afterAll(async () => {
  await model.close();
  await nc.close();
  redis.disconnect();
  rmSync(dir, { recursive: true, force: true });
});

/** Runs the CLI to its end. */
function requeue(...args: string[]) {
  const started = Date.now();
  const out = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], {
    cwd: repoRoot,
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...process.env, REDIS_URL: redisUrl() },
  });
  return { ...out, ms: Date.now() - started };
}

/** Starts `requeue consume …`; resolves its exit code and stderr when it ends. */
function startConsume(args: string[], results: string) {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'src/cli/main.ts', 'consume', ...args],
    {
      cwd: repoRoot,
      env: { ...process.env, REDIS_URL: redisUrl(), RESULTS_FILE: results, LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<{ code: number | null; stderr: string }>((resolve) =>
    child.once('close', (code) => resolve({ code, stderr })),
  );
  cleanups.push(async () => {
    if (child.exitCode === null) child.kill('SIGKILL');
    await exited;
  });
  return { child, exited };
}

async function waitFor(what: string, check: () => Promise<boolean> | boolean, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

function lines(file: string): string[] {
  try {
    return readFileSync(file, 'utf8').trim().split('\n').filter(Boolean);
  } catch {
    return [];
  }
}

describe('requeue consume: bad input', () => {
  it('an unreachable AMQP broker is one line naming it (no password), exit 2, fast', () => {
    const r = requeue(
      'consume',
      'amqp',
      '--url',
      'amqp://u:secret@127.0.0.1:1',
      '--queue',
      'q',
      '--handler',
      handler,
    );
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/cannot reach the AMQP broker at amqp:\/\/u:\*+@127\.0\.0\.1:1/);
    expect(r.stderr).not.toContain('secret');
    expect(r.ms).toBeLessThan(15_000);
  });

  it('an unreachable NATS is one line naming it, exit 2', () => {
    const r = requeue(
      'consume',
      'nats',
      '--servers',
      'nats://127.0.0.1:1',
      '--stream',
      's',
      '--consumer',
      'c',
      '--handler',
      handler,
    );
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/cannot reach NATS at nats:\/\/127\.0\.0\.1:1/);
  });

  it('a bad worker flag or retry queue name is one line naming it, exit 2', () => {
    const bad = requeue(
      'consume',
      'amqp',
      '--url',
      amqpUrl,
      '--queue',
      'q',
      '--handler',
      handler,
      '--concurrency',
      '0',
    );
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/--concurrency/);
    const name = requeue(
      'consume',
      'amqp',
      '--url',
      amqpUrl,
      '--queue',
      'q',
      '--handler',
      handler,
      '--retry-queue',
      'a:b',
    );
    expect(name.status).toBe(2);
    expect(name.stderr).toMatch(/--retry-queue/);
  });
});

describe('requeue consume: end to end', () => {
  it(
    'amqp: runs, retries, dead-letters invalid and binary bodies with their reason; dlq list and stats show them; SIGTERM ends it',
    { timeout: 90_000 },
    async () => {
      const queue = uniqueQueueName('cli-amqp');
      await channel.assertQueue(queue, { durable: true });
      const retryQueue = defaultAmqpRetryQueue(queue);
      cleanups.push(async () => {
        await channel.deleteQueue(queue);
        await cleanQueue(redis, retryQueue);
      });
      const results = join(dir, `${queue}.txt`);
      writeFileSync(results, '');
      await publishAll(model, queue, [
        { body: Buffer.from('{"n":1}') },
        { body: Buffer.from('{"n":2,"fail":1}') },
        { body: Buffer.from('{"n":"x"}'), options: { messageId: 'invalid' } },
        {
          body: Buffer.from([0xff, 0x00]),
          options: { messageId: 'binary', headers: { evil: { __proto__: 1 } } },
        },
      ]);
      const { child, exited } = startConsume(
        [
          'amqp',
          '--url',
          amqpUrl,
          '--queue',
          queue,
          '--handler',
          handler,
          '--policy',
          policy,
          '--concurrency',
          '2',
          '--shutdown-timeout-ms',
          '3000',
        ],
        results,
      );
      await waitFor('both good ones', () => lines(results).length === 2);
      expect(lines(results).sort()).toEqual(['1 1', '2 2']);
      await waitFor('two dead', () => {
        const r = requeue('dlq', 'list', retryQueue, '--json');
        return r.status === 0 && (JSON.parse(r.stdout) as unknown[]).length === 2;
      });
      const dead = JSON.parse(requeue('dlq', 'list', retryQueue, '--json').stdout) as {
        reason: string;
      }[];
      expect(dead.map((d) => d.reason)).toEqual(['invalid-payload', 'invalid-payload']);
      const stats = requeue('stats', retryQueue);
      expect(stats.status).toBe(0);
      const sent = Date.now();
      child.kill('SIGTERM');
      const { code, stderr } = await exited;
      expect(Date.now() - sent).toBeLessThan(3000 + 2000);
      expect(code).toBe(0);
      expect(stderr).not.toMatch(/at .*\.ts:\d+/);
      expect((await queueCounts(channel, queue)).ready).toBe(0);
    },
  );

  it(
    'nats: runs, retries, dead-letters an invalid body; nothing pending after; SIGTERM ends it',
    { timeout: 90_000 },
    async () => {
      const stream = uniqueQueueName('cli_nats').replace(/-/g, '_');
      await makeStream(nc, stream, 'work');
      const retryQueue = defaultNatsRetryQueue(stream, 'work');
      cleanups.push(async () => {
        await deleteStream(nc, stream);
        await cleanQueue(redis, retryQueue);
      });
      const results = join(dir, `${stream}.txt`);
      writeFileSync(results, '');
      const js = nc.jetstream();
      for (const body of ['{"n":1}', '{"n":2,"fail":1}', '{"n":"x"}'])
        await js.publish(`${stream}.in`, Buffer.from(body));
      const { child, exited } = startConsume(
        [
          'nats',
          '--servers',
          natsUrl,
          '--stream',
          stream,
          '--consumer',
          'work',
          '--handler',
          handler,
          '--policy',
          policy,
          '--failure-mode',
          'nak',
          '--shutdown-timeout-ms',
          '3000',
        ],
        results,
      );
      await waitFor('both good ones', () => lines(results).length === 2);
      await waitFor('one dead', () => {
        const r = requeue('dlq', 'list', retryQueue, '--json');
        return r.status === 0 && (JSON.parse(r.stdout) as unknown[]).length === 1;
      });
      await waitFor('nothing pending', async () => {
        const c = await consumerCounts(nc, stream, 'work');
        return c.pending === 0 && c.ackPending === 0;
      });
      child.kill('SIGTERM');
      const { code } = await exited;
      expect(code).toBe(0);
    },
  );

  it(
    'amqp --republish-exchange amq.default and nats --republish-subject: a retry goes back through the broker and the consumer runs it with its attempt',
    { timeout: 90_000 },
    async () => {
      const queue = uniqueQueueName('cli-amqp-republish');
      await channel.assertQueue(queue, { durable: true });
      const stream = uniqueQueueName('cli_nats_republish').replace(/-/g, '_');
      await makeStream(nc, stream, 'work');
      cleanups.push(async () => {
        await channel.deleteQueue(queue);
        await cleanQueue(redis, defaultAmqpRetryQueue(queue));
        await deleteStream(nc, stream);
        await cleanQueue(redis, defaultNatsRetryQueue(stream, 'work'));
      });
      const amqpResults = join(dir, `${queue}.txt`);
      const natsResults = join(dir, `${stream}.txt`);
      await publishAll(model, queue, [{ body: Buffer.from('{"n":1,"fail":1}') }]);
      await nc.jetstream().publish(`${stream}.in`, Buffer.from('{"n":2,"fail":1}'));
      const common = ['--handler', handler, '--policy', policy, '--shutdown-timeout-ms', '3000'];
      const amqp = startConsume(
        [
          'amqp',
          '--url',
          amqpUrl,
          '--queue',
          queue,
          '--republish-exchange',
          'amq.default',
          ...common,
        ],
        amqpResults,
      );
      const nats = startConsume(
        [
          'nats',
          '--servers',
          natsUrl,
          '--stream',
          stream,
          '--consumer',
          'work',
          '--republish-subject',
          `${stream}.again`,
          ...common,
        ],
        natsResults,
      );
      await waitFor('the amqp retry', () => lines(amqpResults).length === 1);
      await waitFor('the nats retry', () => lines(natsResults).length === 1);
      // Attempt 2, run by the consumer from the republished message (routing key: the queue).
      expect(lines(amqpResults)).toEqual([`1 2 ${queue} 2`]);
      expect(lines(natsResults)).toEqual([`2 2 ${stream}.again 2`]);
      await waitFor('nothing pending', async () => {
        const c = await consumerCounts(nc, stream, 'work');
        return c.pending === 0 && c.ackPending === 0;
      });
      amqp.child.kill('SIGTERM');
      nats.child.kill('SIGTERM');
      expect((await amqp.exited).code).toBe(0);
      expect((await nats.exited).code).toBe(0);
      expect((await queueCounts(channel, queue)).ready).toBe(0);
    },
  );
});
