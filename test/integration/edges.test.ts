import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeadLetterQueue } from '../../src/scheduler/dlq/dead-letter-queue.js';
import { runTs, type CommandResult } from '../harness/child.js';
import { seedDead } from '../harness/dlq.js';
import {
  cleanQueue,
  connect,
  redisUrl,
  startRedisServer,
  uniqueQueueName,
  type RedisServerHandle,
} from '../harness/redis.js';

/**
 * Regressions of the edges (issue 9): every bad start exits within seconds with
 * one line naming the setting, and secrets stay out of what is shown.
 */

const admin = connect();
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'requeue-edges-'));
});
afterAll(() => admin.disconnect());

/** Writes a config file and returns its path. */
async function configFile(config: unknown): Promise<string> {
  const path = join(dir, `${uniqueQueueName('config')}.json`);
  await writeFile(path, typeof config === 'string' ? config : JSON.stringify(config));
  return path;
}

/**
 * How long a bad start may take, and when it is killed. The hangs these tests
 * guard against took 40–60 s or never ended; a bad start takes a second or two
 * plus tsx compiling the process, which took up to 14 s on a 2-core machine at
 * a load of 17 (a 10 s bound failed there by chance).
 */
const BAD_START_MS = 20_000;
const BAD_START_KILL_MS = 30_000;

/** Starts the service with `env`; it must end by itself. */
function service(env: Record<string, string>): Promise<CommandResult & { ms: number }> {
  const started = Date.now();
  return runTs('workers/service/main.ts', [], env, BAD_START_KILL_MS).then((r) => ({
    ...r,
    ms: Date.now() - started,
  }));
}

/** A bad start: code 2, within seconds, one line on stderr naming `field`, no stack trace. */
function expectBadStart(result: CommandResult & { ms: number }, field: RegExp): void {
  expect(result.code, result.stderr).toBe(2);
  expect(result.ms).toBeLessThan(BAD_START_MS);
  const lines = result.stderr.trimEnd().split('\n');
  expect(lines, result.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(field);
  expect(result.stderr).not.toMatch(/\n\s+at /);
}

describe('bad starts of the service exit with one line', { timeout: 90_000 }, () => {
  it('"allowPrivate": "false" in the config file turned the SSRF guard off', async () => {
    const path = await configFile({ webhooks: { allowPrivate: 'false' } });
    expectBadStart(
      await service({ REQUEUE_CONFIG: path }),
      /config\.webhooks\.allowPrivate: .*expected boolean, received string/,
    );
  });

  it('LOG_LEVEL=verbose printed a stack trace', async () => {
    expectBadStart(await service({ LOG_LEVEL: 'verbose' }), /env\.LOG_LEVEL/);
  });

  it('a bad HOST hung the service', async () => {
    expectBadStart(
      await service({ HOST: 'not a host!', REDIS_URL: redisUrl() }),
      /config\.host: must be an IP address or a host name/,
    );
  });

  it('a HOST the machine does not have hung the service', async () => {
    expectBadStart(
      await service({ HOST: '10.254.254.254', PORT: '0', REDIS_URL: redisUrl() }),
      /config\.host: cannot listen on 10\.254\.254\.254/,
    );
  });

  it('duplicate queues, a clash with the webhook queue and an x.dlq queue were accepted', async () => {
    const handler = 'examples/flaky-handler.mjs';
    const [dup, clash, dlq] = await Promise.all([
      configFile({
        queues: [
          { name: 'a', handler },
          { name: 'a', handler },
        ],
      }),
      configFile({ queues: [{ name: 'webhooks', handler }] }),
      configFile({ queues: [{ name: 'orders.dlq', handler }] }),
    ]);
    const [r1, r2, r3] = await Promise.all([
      service({ REQUEUE_CONFIG: dup }),
      service({ REQUEUE_CONFIG: clash }),
      service({ REQUEUE_CONFIG: dlq }),
    ]);
    expectBadStart(r1, /config\.queues\.1\.name: "a" is already used by config\.queues\.0\.name/);
    expectBadStart(r2, /config\.queues\.0\.name: "webhooks" is already used by config\.webhooks/);
    expectBadStart(r3, /config\.queues\.0\.name: must not end in "\.dlq"/);
  });

  it('a handler module that does not exist, or exports no function, is named', async () => {
    const [missing, notFunction] = await Promise.all([
      configFile({ queues: [{ name: 'a', handler: 'no/such/module.mjs' }] }),
      configFile({ queues: [{ name: 'a', handler: 'test/fixtures/not-a-handler.mjs' }] }),
    ]);
    const [r1, r2] = await Promise.all([
      service({ REQUEUE_CONFIG: missing }),
      service({ REQUEUE_CONFIG: notFunction }),
    ]);
    expectBadStart(r1, /config\.queues\.0\.handler: cannot load no\/such\/module\.mjs/);
    expectBadStart(r2, /config\.queues\.0\.handler: .* has no default export function/);
  });
});

describe('a Redis that refuses the password', { timeout: 90_000 }, () => {
  let server: RedisServerHandle;
  beforeAll(async () => {
    server = await startRedisServer({ appendonly: false, args: ['--requirepass', 'right-pass'] });
  });
  afterAll(() => server.stop());

  it('the service logged the Redis password 43 times in 12 s when Redis refused it', async () => {
    const password = 'wrong-pass-7c1e9a';
    const result = await service({
      REDIS_URL: `redis://:${password}@127.0.0.1:${server.port}`,
      PORT: '0',
      LOG_LEVEL: 'trace',
    });
    expect(result.stdout + result.stderr).not.toContain(password);
    expectBadStart(result, /config\.redisUrl: Redis refused the credentials \(WRONGPASS\)/);
  });

  it('`requeue worker` and the stream worker retried a refused password for ever', async () => {
    const password = 'wrong-pass-3b8f10';
    const url = `redis://:${password}@127.0.0.1:${server.port}`;
    const timed = async (script: string, args: string[], env: Record<string, string>) => {
      const started = Date.now();
      const result = await runTs(script, args, { ...env, LOG_LEVEL: 'info' }, BAD_START_KILL_MS);
      return { ...result, ms: Date.now() - started };
    };
    const [cli, stream] = await Promise.all([
      timed('src/cli/main.ts', ['worker', 'q', '--handler', 'examples/flaky-handler.mjs'], {
        REDIS_URL: url,
      }),
      timed('workers/stream/main.ts', [], {
        REDIS_URL: url,
        STREAM: 's',
        GROUP: 'g',
        HANDLER: 'examples/flaky-handler.mjs',
      }),
    ]);
    expectBadStart(cli, /^requeue: REDIS_URL: Redis refused the credentials/);
    expectBadStart(stream, /^requeue-stream: env\.REDIS_URL: Redis refused the credentials/);
    expect(cli.stdout + cli.stderr + stream.stdout + stream.stderr).not.toContain(password);
  });
});

describe('the CLI never prints a webhook’s credentials', { timeout: 90_000 }, () => {
  it('dlq show and dlq list --json printed the URL’s userinfo, ?token= and the Cookie header', async () => {
    const queue = uniqueQueueName('edges-dlq');
    const data = {
      endpoint: {
        id: 'ep_1',
        url: 'https://ada:url-password-1@hooks.example.com/in?token=query-token-2&v=1',
        secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
      },
      event: { id: 'evt_1', type: 'invoice.paid', payload: { invoice: 42 } },
      headers: { Cookie: 'session=cookie-value-3', 'X-Api-Key': 'api-key-4', Accept: 'json' },
    };
    await seedDead(admin, {
      id: 'ep_1/evt_1',
      name: 'webhook',
      data,
      opts: {},
      source: queue,
      reason: 'permanent-error',
      message:
        'POST https://ada:url-password-1@hooks.example.com/in?token=query-token-2 answered 400',
      attempts: 1,
      deadAt: Date.now(),
      history: [],
      replays: 0,
    });
    try {
      const env = { REDIS_URL: redisUrl() };
      const [show, showJson, list, listJson] = await Promise.all([
        runTs('src/cli/main.ts', ['dlq', 'show', queue, 'ep_1/evt_1'], env),
        runTs('src/cli/main.ts', ['dlq', 'show', queue, 'ep_1/evt_1', '--json'], env),
        runTs('src/cli/main.ts', ['dlq', 'list', queue], env),
        runTs('src/cli/main.ts', ['dlq', 'list', queue, '--json'], env),
      ]);
      for (const result of [show, showJson, list, listJson]) {
        expect(result.code, result.stderr).toBe(0);
        for (const secret of [
          'url-password-1',
          'query-token-2',
          'cookie-value-3',
          'api-key-4',
          'MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
        ])
          expect(result.stdout).not.toContain(secret);
      }
      expect(show.stdout).toContain('hooks.example.com');
      const shown = JSON.parse(listJson.stdout) as { data: typeof data }[];
      expect(shown[0]?.data.endpoint.url).toBe(
        'https://ada:***@hooks.example.com/in?token=***&v=1',
      );
      expect(shown[0]?.data.headers.Accept).toBe('json');
      // What is stored for replay is intact.
      const dead = new DeadLetterQueue(queue, { connection: admin });
      expect((await dead.get('ep_1/evt_1'))?.data).toEqual(data);
      await dead.close();
    } finally {
      await cleanQueue(admin, queue);
    }
  });

  it('a queue name BullMQ refuses hung `requeue worker`', async () => {
    const result = await runTs(
      'src/cli/main.ts',
      ['worker', 'a:b', '--handler', 'examples/flaky-handler.mjs'],
      { REDIS_URL: redisUrl() },
    );
    expect(result.code).toBe(2);
    expect(result.stderr.trim()).toBe(
      'requeue: <queue>: "a:b" must not contain ":" (BullMQ refuses it)',
    );
  });

  it('plan --max-attempts 1000000 never finished', async () => {
    const result = await runTs('src/cli/main.ts', ['plan', '--max-attempts', '1000000'], {});
    expect(result.code).toBe(2);
    expect(result.stderr.trim()).toMatch(/^requeue: --max-attempts \(maxAttempts\): .*1000$/);
  });
});
