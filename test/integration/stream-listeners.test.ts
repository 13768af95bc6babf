/**
 * The stream consumer's listeners cannot hurt it (issue 21, part 8): every
 * event is emitted with `safeEmit` once what it announces is stored (an
 * entry's after its XACK), so a listener that throws or rejects is logged and
 * changes nothing. Each test is named after what a plain `emit` broke.
 */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import {
  createStreamConsumer,
  defaultRetryQueueName,
  type StreamConsumer,
  type StreamMessage,
} from '../../workers/stream/index.js';
import { cleanQueue, connect, redisUrl, uniqueQueueName } from '../harness/redis.js';

const logger = createLogger({ level: 'silent' });
const group = 'billing';
const redis = connect();
const streams: string[] = [];
const consumers: StreamConsumer[] = [];

afterEach(async () => {
  for (const consumer of consumers.splice(0)) await consumer.close({ timeoutMs: 2000 });
  for (const stream of streams.splice(0)) {
    await redis.del(stream);
    await cleanQueue(redis, defaultRetryQueueName(stream, group));
  }
});

afterAll(() => {
  redis.disconnect();
});

function newStream(): string {
  const stream = uniqueQueueName('stream-listeners');
  streams.push(stream);
  return stream;
}

/** A consumer that reclaims fast, so a redelivery caused by a listener would show within the test. */
function consume(
  stream: string,
  handler: (message: StreamMessage) => Promise<void>,
  options: { consumer?: string } = {},
): StreamConsumer {
  const consumer = createStreamConsumer({
    connection: redisUrl(),
    stream,
    group,
    handler,
    startId: '0',
    blockMs: 50,
    claimIdleMs: 200,
    claimIntervalMs: 100,
    errorBackoffMs: 50,
    policy: { strategy: 'fixed', baseMs: 60_000, capMs: 60_000, maxAttempts: 5 },
    logger,
    ...options,
  });
  consumers.push(consumer);
  return consumer;
}

/** Polls `check` until it holds; fails naming `what` after `timeoutMs`. */
async function waitFor(what: string, check: () => Promise<boolean> | boolean, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function pendingCount(stream: string): Promise<number> {
  const [count] = (await redis.xpending(stream, group)) as [number, ...unknown[]];
  return count;
}

/** Adds `n` entries; returns their ids. */
async function addEntries(stream: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 1; i <= n; i += 1) ids.push((await redis.xadd(stream, '*', 'n', String(i)))!);
  return ids;
}

/** Counts runs per entry id. */
function countingHandler(runs: Map<string, number>) {
  return async (message: StreamMessage): Promise<void> => {
    runs.set(message.id, (runs.get(message.id) ?? 0) + 1);
  };
}

const boom = (): never => {
  throw new Error('listener failed');
};

describe('stream consumer listeners', () => {
  it('a throwing message:processed listener does not run the handler again', async () => {
    const stream = newStream();
    const runs = new Map<string, number>();
    const consumer = consume(stream, countingHandler(runs));
    const acked: string[] = [];
    const processed: string[] = [];
    const processedBeforeAck: string[] = [];
    consumer.on('messages:acked', ({ ids }) => acked.push(...ids));
    consumer.on('message:processed', ({ id }) => {
      processed.push(id);
      if (!acked.includes(id)) processedBeforeAck.push(id);
      boom();
    });
    await consumer.waitUntilReady();
    const ids = await addEntries(stream, 3);
    await waitFor('every entry to be announced', () => ids.every((id) => processed.includes(id)));
    // Longer than claimIdleMs: an entry left pending by the listener would have been reclaimed.
    await new Promise((r) => setTimeout(r, 600));

    expect(await pendingCount(stream)).toBe(0);
    expect(ids.map((id) => runs.get(id))).toEqual([1, 1, 1]);
    expect(processed.sort()).toEqual([...ids].sort());
    // Announced after the acknowledgement was stored, never before.
    expect(processedBeforeAck).toEqual([]);
    const retryJobs = await consumer.retryQueue.bull.getJobCounts('wait', 'delayed');
    expect(retryJobs).toEqual({ wait: 0, delayed: 0 });
  });

  it('a throwing messages:claimed listener does not leave reclaimed entries unprocessed', async () => {
    const stream = newStream();
    await redis.xgroup('CREATE', stream, group, '0', 'MKSTREAM');
    const ids = await addEntries(stream, 4);
    // A consumer that died holding them: delivered, never acknowledged.
    await redis.call('XREADGROUP', 'GROUP', group, 'dead', 'COUNT', 10, 'STREAMS', stream, '>');
    const runs = new Map<string, number>();
    const consumer = consume(stream, countingHandler(runs), { consumer: 'rescuer' });
    const claimed: string[] = [];
    consumer.on('messages:claimed', (event) => {
      claimed.push(...event.ids);
      boom();
    });
    await waitFor('every reclaimed entry to be acknowledged', async () => {
      return ids.every((id) => runs.has(id)) && (await pendingCount(stream)) === 0;
    });
    expect(ids.map((id) => runs.get(id))).toEqual([1, 1, 1, 1]);
    expect(claimed.sort()).toEqual([...ids].sort());
  });

  it('a throwing error listener does not stop the consumer', async () => {
    const stream = newStream();
    const runs = new Map<string, number>();
    const consumer = consume(stream, countingHandler(runs));
    let errors = 0;
    consumer.on('error', () => {
      errors += 1;
      boom();
    });
    await consumer.waitUntilReady();
    const [first] = await addEntries(stream, 1);
    await waitFor('the first entry to run', () => runs.has(first!));
    // The group is deleted under the consumer: its next read fails (NOGROUP) and is reported.
    await redis.xgroup('DESTROY', stream, group);
    await waitFor('the failure to reach the error listener', () => errors > 0);
    await waitFor('the group to be made again', async () => {
      const groups = (await redis.xinfo('GROUPS', stream)) as unknown[];
      return groups.length === 1;
    });
    const later = await addEntries(stream, 2);
    await waitFor('the later entries to run', () => later.every((id) => runs.has(id)));
    await waitFor(
      'the later entries to be acknowledged',
      async () => (await pendingCount(stream)) === 0,
    );
    expect(later.map((id) => runs.get(id))).toEqual([1, 1]);
  });

  it('async listeners that reject are no unhandled rejection', async () => {
    const stream = newStream();
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => {
      unhandled.push(reason);
    };
    process.on('unhandledRejection', onUnhandled);
    try {
      const runs = new Map<string, number>();
      const consumer = consume(stream, async (message) => {
        runs.set(message.id, (runs.get(message.id) ?? 0) + 1);
        if (message.fields.n === '2') throw new Error('handler failed');
      });
      const seen = new Set<string>();
      const rejecting = (event: string) => async (): Promise<void> => {
        seen.add(event);
        await Promise.resolve();
        throw new Error(`${event} listener rejected`);
      };
      for (const event of [
        'message:processed',
        'message:handed-off',
        'messages:acked',
        'messages:claimed',
        'error',
      ] as const) {
        consumer.on(event, rejecting(event));
      }
      await consumer.waitUntilReady();
      const ids = await addEntries(stream, 2);
      await waitFor('both entries to be announced', () =>
        ['message:processed', 'message:handed-off', 'messages:acked'].every((e) => seen.has(e)),
      );
      await waitFor(
        'both entries to be acknowledged',
        async () => (await pendingCount(stream)) === 0,
      );
      // Rejections are reported on a later turn: give them one.
      await new Promise((r) => setTimeout(r, 100));
      expect(unhandled).toEqual([]);
      expect(ids.map((id) => runs.get(id))).toEqual([1, 1]);
      const handedOff = await consumer.retryQueue.bull.getJobCounts('wait', 'delayed');
      expect((handedOff.wait ?? 0) + (handedOff.delayed ?? 0)).toBe(1);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});
