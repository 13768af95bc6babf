/**
 * SIGTERM ends every requeue process within its shutdown timeout, whatever
 * its handlers or its Redis do (issue 8, item 7; issue 21, part 7: within the
 * timeout plus ~100 ms, measured from the signal). Each test starts the real
 * process, makes it as hard to stop as it can be (a handler that never
 * returns and holds the event loop open; a Redis that stops answering or is
 * gone), sends SIGTERM, and times the exit. The work a hung handler held is
 * not lost: its job is still active (stalled recovery takes it), its stream
 * entry still pending (another consumer reclaims it).
 */
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createQueue } from '../../src/scheduler/queue.js';
import { sleep } from '../../src/util/lifecycle.js';
import { enqueueWebhook } from '../../workers/webhook/index.js';
import { spawnTs, type ChildExit, type TsChild } from '../harness/child.js';
import { onCleanup } from '../harness/cleanup.js';
import { handlerStarted, printed, privateRedis, silentEndpoint } from '../harness/stopping.js';
import {
  cleanedQueueName,
  cleanQueue,
  connect,
  redisUrl,
  uniqueQueueName,
} from '../harness/redis.js';

/** The shutdown timeout every process under test is given (issue 21 measured with 1,500 ms). */
const SHUTDOWN_TIMEOUT_MS = 1_500;
/**
 * What a process may take past its timeout: exiting itself, and the test
 * seeing it. A process keeps 250 ms of its timeout for its own exit
 * (`exitReserveMs`), so it is normally gone before the timeout; this is the
 * test's slack for load only (before the reserve, exits came 16–60 ms past the
 * timeout, once 230 ms, and at a load of 9 a stalled log reader's 335 ms). A
 * linger after the close (there was one of 1,000 ms) or a step given the
 * whole timeout after another still fails it.
 */
const EXIT_GRACE_MS = 300;
/** A child starts under tsx in a second or two; two cores are shared. */
const TEST_TIMEOUT_MS = 60_000;

const admin = connect();

afterAll(() => {
  admin.disconnect();
});

/** Starts `script` with its logs on stdout; killed after the test if still alive. */
function start(script: string, args: string[], env: Record<string, string>): TsChild {
  const child = spawnTs(script, args, { LOG_LEVEL: 'info', ...env });
  onCleanup(async () => {
    await child.kill('SIGKILL');
  });
  return child;
}

/**
 * Lets a process started under `node --import tsx` settle before it is
 * signalled. Under tsx 4.23 on Node 20, a SIGTERM that arrives within a few
 * milliseconds of the process's first output sometimes kills it outright
 * (exit by signal, no listener called) although its listener is installed: a
 * three-line script that listens and prints reproduces it, `node` alone does
 * not. The processes here print their start line that early; waiting for
 * Redis to be noticed gone takes about this long anyway.
 */
const SETTLE_MS = 500;

/** Sends SIGTERM and measures how long the process takes to end. */
async function terminate(child: TsChild): Promise<{ exit: ChildExit; elapsedMs: number }> {
  const sentAt = performance.now();
  child.proc.kill('SIGTERM');
  // Far past the bound, stop waiting: the assertion below then says by how much it was missed.
  const backstop = setTimeout(
    () => child.proc.kill('SIGKILL'),
    SHUTDOWN_TIMEOUT_MS + EXIT_GRACE_MS + 10_000,
  );
  try {
    const exit = await child.exited;
    return { exit, elapsedMs: performance.now() - sentAt };
  } finally {
    clearTimeout(backstop);
  }
}

/** Asserts that the process ended by itself within its shutdown timeout and the grace. */
async function expectEndsInTime(child: TsChild): Promise<void> {
  const { exit, elapsedMs } = await terminate(child);
  const output = `stdout:\n${child.stdout()}\nstderr:\n${child.stderr()}`;
  expect(exit.signal, `killed by the test after ${Math.round(elapsedMs)} ms\n${output}`).toBeNull();
  expect(elapsedMs, output).toBeLessThan(SHUTDOWN_TIMEOUT_MS + EXIT_GRACE_MS);
  expect(child.stdout(), output).toContain('draining');
  if (process.env.SHUTDOWN_TEST_DEBUG)
    console.log(`exit after ${Math.round(elapsedMs)} ms\n${output}`);
}

/** One kind of requeue process: how to start it, and how to give it work that never ends. */
interface ProcessKind {
  /** What it prints once it is ready for work. */
  started: string;
  /**
   * Starts it against `url`. `hang` gives it work its handler never ends;
   * `kept` asserts, after the exit, that this work is still where recovery finds it.
   */
  spawn(
    url: string,
    env?: Record<string, string>,
  ): Promise<{ child: TsChild; hang: () => Promise<void>; kept: () => Promise<void> }>;
  /** Its hung handler is a module of ours, which can log through the process's logger. */
  handlerModule: boolean;
}

/** The hung job is still active (stalled recovery's to take), and none failed or vanished. */
async function expectStillActive(name: string): Promise<void> {
  const queue = createQueue(name, { connection: redisUrl() });
  try {
    const counts = await queue.bull.getJobCounts('active', 'failed', 'completed', 'wait');
    expect(counts).toEqual({ active: 1, failed: 0, completed: 0, wait: 0 });
  } finally {
    await queue.close();
  }
}

/** Adds a job to `name` on the run's Redis. */
async function addJob(name: string): Promise<void> {
  const queue = createQueue(name, { connection: redisUrl() });
  try {
    await queue.add('hang', {});
  } finally {
    await queue.close();
  }
}

const kinds: Record<string, ProcessKind> = {
  'requeue worker': {
    handlerModule: true,
    started: 'worker started',
    spawn: async (url, env = {}) => {
      const name = cleanedQueueName(admin, 'shutdown-cli');
      const marker = `requeue:{${name}}:test:started`;
      const child = start(
        'src/cli/main.ts',
        [
          'worker',
          name,
          '--handler',
          'test/fixtures/hanging-handler.ts',
          '--shutdown-timeout-ms',
          String(SHUTDOWN_TIMEOUT_MS),
        ],
        { ...env, REDIS_URL: url, HANG_MARKER: marker, HANG_MARKER_REDIS_URL: redisUrl() },
      );
      return {
        child,
        hang: async () => {
          await addJob(name);
          await handlerStarted(child, marker);
        },
        kept: () => expectStillActive(name),
      };
    },
  },
  'the service': {
    handlerModule: true,
    started: 'requeue service started',
    spawn: async (url, env = {}) => {
      const name = cleanedQueueName(admin, 'shutdown-service');
      const marker = `requeue:{${name}}:test:started`;
      const dir = await mkdtemp(join(tmpdir(), 'requeue-shutdown-'));
      const config = join(dir, 'config.json');
      await writeFile(
        config,
        JSON.stringify({
          port: 0,
          webhooks: { enabled: false },
          queues: [{ name, handler: 'test/fixtures/hanging-handler.ts', concurrency: 1 }],
        }),
      );
      const child = start('workers/service/main.ts', [], {
        ...env,
        REDIS_URL: url,
        REQUEUE_CONFIG: config,
        REQUEUE_SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS),
        HANG_MARKER: marker,
        HANG_MARKER_REDIS_URL: redisUrl(),
      });
      return {
        child,
        hang: async () => {
          await addJob(name);
          await handlerStarted(child, marker);
        },
        kept: () => expectStillActive(name),
      };
    },
  },
  'the webhook worker': {
    handlerModule: false,
    started: 'webhook worker started',
    spawn: async (url, env = {}) => {
      const name = cleanedQueueName(admin, 'shutdown-webhook');
      const child = start('workers/webhook/main.ts', [], {
        ...env,
        REDIS_URL: url,
        WEBHOOK_QUEUE: name,
        WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
        // Longer than the test: the delivery hangs until the process ends.
        WEBHOOK_TIMEOUT_MS: '600000',
        WEBHOOK_SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS),
      });
      return {
        child,
        hang: async () => {
          const endpoint = await silentEndpoint();
          const queue = createQueue(name, { connection: redisUrl() });
          try {
            await enqueueWebhook(queue, {
              endpoint: { id: 'ep-silent', url: endpoint.url },
              event: { id: `evt_${name}`, type: 'test.hang', payload: {} },
            });
          } finally {
            await queue.close();
          }
          await endpoint.received;
        },
        kept: () => expectStillActive(name),
      };
    },
  },
  'the stream worker': {
    handlerModule: true,
    started: 'stream consumer started',
    spawn: async (url, env = {}) => {
      const stream = uniqueQueueName('shutdown-stream');
      const group = 'billing';
      const retryQueue = `${stream}.${group}.retry`;
      onCleanup(async () => {
        await admin.del(stream);
        await cleanQueue(admin, retryQueue);
      });
      const marker = `requeue:{${stream}}:test:started`;
      const child = start('workers/stream/main.ts', [], {
        ...env,
        REDIS_URL: url,
        STREAM: stream,
        GROUP: group,
        HANDLER: 'test/fixtures/hanging-handler.ts',
        START_ID: '0',
        BLOCK_MS: '100',
        SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS),
        HANG_MARKER: marker,
        HANG_MARKER_REDIS_URL: redisUrl(),
      });
      return {
        child,
        hang: async () => {
          await admin.xadd(stream, '*', 'n', '1');
          await handlerStarted(child, marker);
        },
        // Pending in the group, unacknowledged: the next consumer reclaims it.
        kept: async () => {
          const [pending] = (await admin.xpending(stream, group)) as [number, ...unknown[]];
          expect(pending).toBe(1);
        },
      };
    },
  },
};

describe.each(Object.entries(kinds))('%s', (label, kind) => {
  it(
    `SIGTERM ends ${label} whose handler hangs within its timeout, its work kept for recovery`,
    async () => {
      const { child, hang, kept } = await kind.spawn(redisUrl());
      await printed(child, kind.started);
      await hang();
      await expectEndsInTime(child);
      await kept();
    },
    TEST_TIMEOUT_MS,
  );

  // The webhook worker runs no handler of the user's that could fill its log pipe:
  // that case is not generated for it (no skipped test).
  if (kind.handlerModule)
    it(
      `SIGTERM ends ${label} whose log reader has stalled within its timeout`,
      async () => {
        // The handler logs more than the pipe holds, through the process's logger, then hangs.
        const { child, hang } = await kind.spawn(redisUrl(), { HANG_LOG_LINES: '5000' });
        await printed(child, kind.started);
        child.proc.stdout!.pause();
        await hang();
        const sentAt = performance.now();
        child.proc.kill('SIGTERM');
        // 'exit', not 'close': the pipe stays unread until the process has gone.
        const exit = await Promise.race([
          new Promise<number | null>((resolve) => child.proc.once('exit', resolve)),
          sleep(SHUTDOWN_TIMEOUT_MS + 10_000).then(() => 'still running' as const),
        ]);
        const elapsedMs = performance.now() - sentAt;
        child.proc.stdout!.resume();
        expect(exit, child.stderr()).not.toBe('still running');
        expect(elapsedMs, child.stderr()).toBeLessThan(SHUTDOWN_TIMEOUT_MS + EXIT_GRACE_MS);
        if (process.env.SHUTDOWN_TEST_DEBUG)
          console.log(`exit after ${Math.round(elapsedMs)} ms (stalled log reader)`);
      },
      TEST_TIMEOUT_MS,
    );

  it(
    `SIGTERM ends ${label} whose Redis stopped answering within its timeout`,
    async () => {
      const redis = await privateRedis();
      const { child } = await kind.spawn(redis.url);
      await printed(child, kind.started);
      await redis.freeze();
      await sleep(SETTLE_MS);
      await expectEndsInTime(child);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    `SIGTERM ends ${label} whose Redis has gone away within its timeout`,
    async () => {
      const redis = await privateRedis();
      const { child } = await kind.spawn(redis.url);
      await printed(child, kind.started);
      await redis.kill();
      await sleep(SETTLE_MS);
      await expectEndsInTime(child);
    },
    TEST_TIMEOUT_MS,
  );
});
