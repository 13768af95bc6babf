import { describe, expect, it } from 'vitest';
import { jobIdForKey } from '../../src/scheduler/job-id.js';
import { parseJobState } from '../../src/policy/job-state.js';
import { createQueue } from '../../src/scheduler/queue.js';
import {
  createStreamConsumer,
  createStreamRetryWorker,
  retryIdempotencyKey,
  retryJobFor,
  type StreamMessage,
} from '../../workers/stream/index.js';
import { jobKey, redisUrl } from '../harness/redis.js';
import {
  cleanUpStreams,
  logger,
  group,
  policy,
  redis,
  closers,
  newStream,
  track,
  waitFor,
  nextEvent,
  pendingCount,
  counter,
  spawnNode,
  exited,
} from './stream-helpers.js';

cleanUpStreams();

describe('stream consumer recovery', () => {
  it('retries a message that fails twice after two delays and acknowledges it once', async () => {
    const { stream, retryQueue } = newStream();
    const runs: { attempt: number; deliveries: number; at: number }[] = [];
    let successes = 0;
    const handler = async (message: StreamMessage) => {
      runs.push({ attempt: message.attempt, deliveries: message.deliveries, at: Date.now() });
      if (runs.length <= 2) throw new Error(`flaky ${runs.length}`);
      successes += 1;
    };
    const consumer = track(
      createStreamConsumer({
        connection: redisUrl(),
        stream,
        group,
        handler,
        policy,
        startId: '0',
        blockMs: 100,
        logger,
      }),
    );
    const worker = track(
      createStreamRetryWorker({ connection: redisUrl(), stream, group, handler, policy, logger }),
    );
    const acked: string[] = [];
    consumer.on('messages:acked', ({ ids }) => acked.push(...ids));
    await Promise.all([consumer.waitUntilReady(), worker.waitUntilReady()]);

    const handedOff = nextEvent(consumer, 'message:handed-off');
    const completed = nextEvent(worker, 'job:completed');
    const id = await redis.xadd(stream, '*', 'n', '1');
    if (id === null) throw new Error('XADD returned no id');
    await handedOff;
    await waitFor('the hand-off to be acknowledged', () => acked.includes(id));
    // Acknowledged as soon as the retry job was stored: nothing is pending in the group.
    expect(await pendingCount(stream)).toBe(0);
    await completed;

    expect(successes).toBe(1);
    expect(runs.map((r) => r.attempt)).toEqual([1, 2, 3]);
    // Each retry waited at least the policy's delay (BullMQ promotes delayed jobs at ms precision).
    expect(runs[1]!.at - runs[0]!.at).toBeGreaterThanOrEqual(policy.baseMs - 1);
    expect(runs[2]!.at - runs[1]!.at).toBeGreaterThanOrEqual(policy.baseMs - 1);

    const jobId = jobIdForKey(retryIdempotencyKey(stream, group, id));
    const state = parseJobState(await redis.hget(jobKey(redis, retryQueue, jobId), 'rq'));
    const failed = state?.history.filter((r) => r.outcome === 'failed') ?? [];
    expect(failed.map((r) => r.attempt)).toEqual([1, 2]);
    expect(failed[0]?.details).toMatchObject({ phase: 'stream', deliveries: 1 });
    expect(failed[0]?.error?.message).toBe('flaky 1');
    for (const record of failed) {
      expect(record.decision).toBe('retry');
      expect(record.delayMs).toBeGreaterThanOrEqual(policy.baseMs);
    }

    // Acknowledged exactly once, never redelivered from the stream.
    expect(acked.filter((a) => a === id)).toHaveLength(1);
    expect(runs.filter((r) => r.attempt === 1)).toHaveLength(1);
    expect(await pendingCount(stream)).toBe(0);
  });

  it('loses no message when a consumer is killed with SIGKILL mid-batch', async () => {
    const { stream } = newStream();
    const total = 50;
    const hangOn = 20;
    await redis.xgroup('CREATE', stream, group, '0', 'MKSTREAM');
    const ids: string[] = [];
    for (let n = 1; n <= total; n += 1) ids.push((await redis.xadd(stream, '*', 'n', String(n)))!);

    const child = spawnNode(['test/fixtures/stream-consumer.ts'], {
      STREAM: stream,
      GROUP: group,
      CONSUMER: 'doomed',
      HANG_ON: String(hangOn),
      BATCH_SIZE: String(total),
    });
    await waitFor(
      'the child to hang on its entry',
      async () => (await counter(stream, hangOn)) >= 1,
      20_000,
    );
    // The entries before the hang are acknowledged as they finish, not at the batch's end.
    await waitFor(
      'the finished entries to be acknowledged',
      async () => (await pendingCount(stream)) === total - hangOn + 1,
    );
    child.kill('SIGKILL');
    await exited(child);

    const deliveries = new Map<string, number>();
    const rescuer = track(
      createStreamConsumer({
        connection: redisUrl(),
        stream,
        group,
        consumer: 'rescuer',
        claimIdleMs: 300,
        blockMs: 50,
        logger,
        handler: async (message) => {
          deliveries.set(message.id, message.deliveries);
          await redis.hincrby(`${stream}:counts`, String(message.fields.n), 1);
        },
      }),
    );
    const claimed: string[] = [];
    rescuer.on('messages:claimed', (event) => claimed.push(...event.ids));
    await waitFor('every entry to be acknowledged', async () => (await pendingCount(stream)) === 0);

    const counts: number[] = [];
    for (let n = 1; n <= total; n += 1) counts.push(await counter(stream, n));
    // None lost: every entry ran at least once.
    expect(counts.every((c) => c >= 1)).toBe(true);
    // The only duplicate is the entry in flight when the child died.
    const duplicates = counts.flatMap((c, i) => (c > 1 ? [i + 1] : []));
    expect(duplicates).toEqual([hangOn]);
    expect(counts[hangOn - 1]).toBe(2);
    expect(claimed.sort()).toEqual(ids.slice(hangOn - 1).sort());
    expect([...deliveries.values()].every((d) => d === 2)).toBe(true);
  });

  it('does not duplicate a retry job when the consumer crashed between hand-off and acknowledgement', async () => {
    const { stream, retryQueue } = newStream();
    await redis.xgroup('CREATE', stream, group, '0', 'MKSTREAM');
    const id = (await redis.xadd(stream, '*', 'n', '1'))!;
    // A consumer reads the entry, its handler fails, the retry job is stored — and it dies before XACK.
    await redis.call('XREADGROUP', 'GROUP', group, 'crashed', 'COUNT', 1, 'STREAMS', stream, '>');
    const job = retryJobFor({
      stream,
      group,
      id,
      fields: { n: '1' },
      streamAttempt: {
        consumer: 'crashed',
        deliveries: 1,
        failedAt: Date.now(),
        error: { class: 'Error', message: 'boom' },
      },
      policy,
    });
    const queue = createQueue(retryQueue, { connection: redisUrl() });
    closers.push(() => queue.close());
    await queue.add(job.name, job.data, job.opts);
    expect(await pendingCount(stream)).toBe(1);

    let runs = 0;
    const restarted = track(
      createStreamConsumer({
        connection: redisUrl(),
        stream,
        group,
        consumer: 'restarted',
        claimIdleMs: 200,
        blockMs: 50,
        policy,
        logger,
        handler: async () => {
          runs += 1;
          throw new Error('still failing');
        },
      }),
    );
    const already = await nextEvent<{ id: string; jobId: string }>(
      restarted,
      'message:already-handed-off',
    );
    expect(already.id).toBe(id);
    await waitFor(
      'the reclaimed entry to be acknowledged',
      async () => (await pendingCount(stream)) === 0,
    );

    // The reclaimed entry was not run again, and the retry queue holds one job for it.
    expect(runs).toBe(0);
    const counts = async () =>
      Object.values(await queue.bull.getJobCounts()).reduce((a, b) => a + b, 0);
    expect(await counts()).toBe(1);
    // A second hand-off of the same entry is removed by its idempotency key.
    await queue.add(job.name, job.data, job.opts);
    expect(await counts()).toBe(1);
    expect(already.jobId).toBe(jobIdForKey(retryIdempotencyKey(stream, group, id)));
  });

  it('runs as a process (workers/stream/main.ts) that retries and drains on SIGTERM', async () => {
    const { stream } = newStream();
    const child = spawnNode(['workers/stream/main.ts'], {
      STREAM: stream,
      GROUP: group,
      HANDLER: 'test/fixtures/stream-counting-handler.ts',
      START_ID: '0',
      BLOCK_MS: '100',
      POLICY: JSON.stringify({ strategy: 'fixed', baseMs: 50, capMs: 50, maxAttempts: 3 }),
      LOG_LEVEL: 'warn',
    });
    for (let n = 1; n <= 5; n += 1) {
      await redis.xadd(stream, '*', 'n', String(n), 'fail', n === 3 ? '1' : '0');
    }
    const expected = [1, 1, 2, 1, 1];
    await waitFor(
      'every entry to be processed',
      async () => {
        for (let n = 1; n <= 5; n += 1)
          if ((await counter(stream, n)) < expected[n - 1]!) return false;
        return (await pendingCount(stream)) === 0;
      },
      20_000,
    );
    child.kill('SIGTERM');
    expect(await exited(child)).toBe(0);
    for (let n = 1; n <= 5; n += 1) expect(await counter(stream, n)).toBe(expected[n - 1]);
  });
});
