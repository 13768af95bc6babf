import type { z } from 'zod';
import { libraryLogger, type Logger } from '../../src/config/logger.js';
import { formatZodError } from '../../src/config/env.js';
import { PermanentError } from '../../src/errors/permanent-error.js';
import { parseRetryPolicy, type RetryPolicyInput } from '../../src/policy/retry-policy.js';
import { resolveRedis, type RedisClient } from '../../src/redis/connection.js';
import { DeadLetterQueue } from '../../src/scheduler/dlq/dead-letter-queue.js';
import { TypedEmitter } from '../../src/scheduler/events.js';
import { jobIdForKey, legacyJobIdForKey } from '../../src/scheduler/job-id.js';
import { createQueue, type RequeueQueue } from '../../src/scheduler/queue.js';
import { sleep, withDeadline } from '../../src/util/lifecycle.js';
import { shutdownBudget } from '../../src/util/signals.js';
import { systemClock, type Clock } from '../../src/util/system.js';
import { AckBatcher } from './ack-batcher.js';
import {
  parseStreamConsumerConfig,
  type StreamConsumerConfig,
  type StreamConsumerOptions,
} from './consumer-config.js';
import type { StreamConsumerEvents } from './events.js';
import type { StreamFields, StreamHandler, StreamMessage } from './message.js';
import { claimIdle, HeldEntries } from './pending-claims.js';
import {
  captureStreamError,
  retryIdempotencyKey,
  retryJobFor,
  type StreamError,
  type StreamRetryJobData,
} from './retry-job.js';
import * as commands from './stream-commands.js';
import type { Delivery } from './stream-commands.js';

/**
 * Reads a Redis Stream through a consumer group and runs a handler per entry.
 *
 * - A success is acknowledged (XACK). Acknowledgements are batched: one XACK
 *   is in flight at a time and carries every entry finished meanwhile.
 * - A failure is handed to the retry queue (a requeue queue, idempotent by
 *   `<stream>/<group>/<id>`) and acknowledged only once that add has
 *   resolved. A crash between the two leaves the entry pending; whoever
 *   reclaims it finds the retry job and only acknowledges it.
 * - Entries idle longer than `claimIdleMs` (their consumer died) are taken
 *   over with XAUTOCLAIM and run like new ones. While it holds a batch the
 *   consumer resets its entries' idle time, so live consumers keep theirs.
 * - Events come after what they announce is stored (an entry's once its
 *   XACK is), through `safeEmit`: a listener that throws or rejects is
 *   logged and changes nothing (no second run, no entry left unprocessed).
 *
 * Delivery is at least once: a handler can run twice for an entry whose
 * consumer died during the handler or before its XACK reached Redis.
 */
export class StreamConsumer<F = StreamFields> extends TypedEmitter<StreamConsumerEvents> {
  readonly config: StreamConsumerConfig;
  readonly retryQueue: RequeueQueue<StreamRetryJobData>;
  private readonly redis: RedisClient;
  private readonly blocking: RedisClient;
  private readonly owned: boolean;
  private readonly dlq: DeadLetterQueue;
  private readonly handler: StreamHandler<F>;
  private readonly schema: z.ZodType<F> | undefined;
  private readonly policy: RetryPolicyInput | undefined;
  private readonly logger: Logger;
  private readonly clock: Clock;
  /** Wakes the loop's pauses when closing. */
  private readonly stopping = new AbortController();
  /** Aborts handlers still running when a close times out. */
  private readonly aborting = new AbortController();
  private readonly readyPromise: Promise<void>;
  private markReady!: () => void;
  private failReady!: (err: unknown) => void;
  private loopPromise: Promise<void> | undefined;
  private closePromise: Promise<void> | undefined;
  private claimCursor = '0-0';
  private nextClaimAt = 0;
  /** Entries delivered to this consumer and not yet acknowledged or released. */
  private readonly held: HeldEntries;
  private readonly acks: AckBatcher;

  constructor(options: StreamConsumerOptions<F>) {
    super();
    const { connection, handler, policy, schema, autorun = true, logger, clock, ...rest } = options;
    this.config = parseStreamConsumerConfig(rest);
    this.handler = handler;
    this.schema = schema;
    // Checked here so a bad policy fails at start, not at the first hand-off.
    if (policy !== undefined) parseRetryPolicy(policy, 'streamConsumer.policy');
    this.policy = policy;
    this.clock = clock ?? systemClock;
    const { stream, group, consumer, retryQueue } = this.config;
    this.logger = libraryLogger(logger).child({ stream, group, consumer });
    ({ redis: this.redis, owned: this.owned } = resolveRedis(connection));
    // XREADGROUP BLOCK holds its connection: it gets one of its own.
    this.blocking = this.redis.duplicate();
    this.retryQueue = createQueue<StreamRetryJobData>(retryQueue, { connection: this.redis });
    this.dlq = new DeadLetterQueue(retryQueue, { connection: this.redis, clock: this.clock });
    this.held = new HeldEntries(this.redis, this.config, (err, message) =>
      this.report(err, message),
    );
    this.acks = new AckBatcher(
      async (ids) => void (await commands.ack(this.redis, { stream, group, ids })),
      (ids) => {
        this.held.drop(ids);
        this.safeEmit(this.logger, 'messages:acked', { stream, ids });
      },
    );
    this.readyPromise = new Promise<void>((resolve, reject) => {
      this.markReady = resolve;
      this.failReady = reject;
    });
    // Nobody may be waiting on readiness; a failure is also logged and emitted.
    this.readyPromise.catch(() => undefined);
    if (autorun) void this.run();
  }

  /** Starts reading (when created with `autorun: false`). Resolves when the loop ends. */
  run(): Promise<void> {
    this.loopPromise ??= this.loop();
    return this.loopPromise;
  }

  /** Resolves once the consumer group exists; rejects if Redis refuses to create it. */
  waitUntilReady(): Promise<void> {
    return this.readyPromise;
  }

  /**
   * Stops reading, lets the handlers already running finish, hands the
   * batch's unstarted entries back to the group (claimable at once), flushes
   * acknowledgements and closes every connection it opened; returns within
   * `timeoutMs` whatever handlers or Redis do. Handlers still running after
   * most of it see their `signal` aborted; their entries stay pending and are
   * reclaimed.
   */
  close({ timeoutMs = 30_000 }: { timeoutMs?: number } = {}): Promise<void> {
    this.closePromise ??= this.shutdown(timeoutMs);
    return this.closePromise;
  }

  private async shutdown(timeoutMs: number): Promise<void> {
    const budget = shutdownBudget(timeoutMs, this.clock);
    this.stopping.abort();
    // Most of the time for running handlers; the rest to close connections.
    const drained = await withDeadline(
      this.loopPromise ?? Promise.resolve(),
      Math.floor(timeoutMs * 0.8),
    );
    if (drained.kind === 'timeout') {
      this.aborting.abort();
      this.logger.warn(
        { timeoutMs },
        'handlers did not finish in time; their entries stay pending',
      );
    }
    this.held.clear();
    this.blocking.disconnect();
    await withDeadline(
      Promise.allSettled([this.dlq.close(), this.retryQueue.close()]),
      budget.left(),
    );
    if (this.owned) this.redis.disconnect();
    this.logger.info('stream consumer stopped');
  }

  private get closing(): boolean {
    return this.stopping.signal.aborted;
  }

  private async loop(): Promise<void> {
    if (!(await this.createGroup())) return;
    while (!this.closing) {
      try {
        await this.acks.drain();
        if (this.claimDue()) {
          await this.claimOnce();
          continue;
        }
        const { stream, group, consumer, batchSize, blockMs } = this.config;
        const untilClaimMs = Math.max(1, this.nextClaimAt - this.clock.now());
        const entries = await commands.readNew(this.blocking, {
          stream,
          group,
          consumer,
          count: batchSize,
          blockMs: Math.min(blockMs, untilClaimMs),
        });
        await this.processBatch(entries);
      } catch (err) {
        if (this.closing) break;
        this.report(err, 'stream loop failed; retrying');
        if (String((err as Error).message).startsWith('NOGROUP')) {
          // The stream or group was deleted under us: make them again.
          if (!(await this.createGroup())) return;
        }
        await sleep(this.config.errorBackoffMs, this.stopping.signal);
      }
    }
    try {
      await this.acks.drain();
    } catch (err) {
      this.report(err, 'final acknowledgement failed; the entries will be reclaimed');
    }
  }

  /** Creates the group, retrying lost connections; false if Redis refuses it or we are closing. */
  private async createGroup(): Promise<boolean> {
    const { stream, group, startId } = this.config;
    while (!this.closing) {
      try {
        await commands.createGroup(this.redis, stream, group, startId);
        this.markReady();
        return true;
      } catch (err) {
        if ((err as Error).name === 'ReplyError') {
          // Redis answered, and no: e.g. the key holds something other than a stream.
          this.report(err, 'cannot create the consumer group');
          this.failReady(err);
          return false;
        }
        this.report(err, 'cannot reach Redis to create the consumer group; retrying');
        await sleep(this.config.errorBackoffMs, this.stopping.signal);
      }
    }
    return false;
  }

  private claimDue(): boolean {
    return this.claimCursor !== '0-0' || this.clock.now() >= this.nextClaimAt;
  }

  /** One XAUTOCLAIM page; the scan continues on the next turn until it wraps. */
  private async claimOnce(): Promise<void> {
    const { stream, batchSize, claimIntervalMs } = this.config;
    const page = await claimIdle(this.redis, this.config, this.claimCursor, batchSize);
    this.claimCursor = page.next;
    if (page.next === '0-0') this.nextClaimAt = this.clock.now() + claimIntervalMs;
    if (page.entries.length === 0) return;
    const ids = page.entries.map((e) => e.id);
    this.logger.info({ count: ids.length }, 'reclaimed idle entries');
    // After XAUTOCLAIM has stored the new owner; nothing a listener does stops their run.
    this.safeEmit(this.logger, 'messages:claimed', { stream, ids });
    await this.processBatch(page.entries);
  }

  /** Runs a batch with bounded concurrency; on close, hands back the entries not started. */
  private async processBatch(entries: Delivery[]): Promise<void> {
    if (entries.length === 0) return;
    this.held.hold(entries);
    let next = 0;
    const lane = async (): Promise<void> => {
      while (next < entries.length && !this.closing) {
        const entry = entries[next]!;
        next += 1;
        await this.processEntry(entry);
      }
    };
    try {
      const lanes = Math.min(this.config.concurrency, entries.length);
      await Promise.all(Array.from({ length: lanes }, lane));
      const unstarted = entries.slice(next);
      if (unstarted.length > 0) {
        await this.held.release(unstarted);
        this.logger.info({ count: unstarted.length }, 'closing: handed unstarted entries back');
      }
      await this.acks.drain();
    } finally {
      this.held.clear();
    }
  }

  /**
   * Runs one entry. Never throws: an entry whose hand-off failed stays
   * pending, unacknowledged, and is reclaimed after `claimIdleMs`. Its event
   * is emitted once its acknowledgement is stored.
   */
  private async processEntry(entry: Delivery): Promise<void> {
    const { stream, group } = this.config;
    const log = this.logger.child({ streamId: entry.id, deliveries: entry.deliveries });
    try {
      if (entry.fields === undefined) {
        // Deleted from the stream while pending: nothing left to run.
        this.acks.ack(entry.id);
        return;
      }
      if (entry.deliveries > 1) {
        const jobId = await this.handedOffJob(entry.id);
        if (jobId !== undefined) {
          log.info({ jobId }, 'already handed off before its consumer stopped; acknowledging');
          this.acks.ack(entry.id, () =>
            this.safeEmit(log, 'message:already-handed-off', { stream, id: entry.id, jobId }),
          );
          return;
        }
      }
      const error = await this.attempt(entry, entry.fields);
      if (error === undefined) {
        this.acks.ack(entry.id, () =>
          this.safeEmit(log, 'message:processed', {
            stream,
            id: entry.id,
            deliveries: entry.deliveries,
          }),
        );
        return;
      }
      const job = retryJobFor({
        stream,
        group,
        id: entry.id,
        fields: entry.fields,
        streamAttempt: {
          consumer: this.config.consumer,
          deliveries: entry.deliveries,
          failedAt: this.clock.now(),
          error,
        },
        ...(this.policy !== undefined && { policy: this.policy }),
      });
      const added = await this.retryQueue.add(job.name, job.data, job.opts);
      log.info({ jobId: added.id, err: error }, 'handed off to the retry queue');
      this.acks.ack(entry.id, () =>
        this.safeEmit(log, 'message:handed-off', {
          stream,
          id: entry.id,
          jobId: added.id,
          deliveries: entry.deliveries,
          error,
        }),
      );
    } catch (err) {
      this.report(err, 'could not hand the entry off; it stays pending and will be reclaimed');
    }
  }

  /** Runs the handler for the stream attempt; returns the failure, if any. */
  private async attempt(entry: Delivery, raw: StreamFields): Promise<StreamError | undefined> {
    const { stream, group, maxDeliveries } = this.config;
    if (entry.deliveries > maxDeliveries) {
      // Consumers keep dying on this entry: let the retry worker, which counts crashes, take it.
      return {
        class: 'StreamDeliveryError',
        message: `delivered ${entry.deliveries} times without being acknowledged (maxDeliveries ${maxDeliveries})`,
      };
    }
    let fields = raw as unknown as F;
    if (this.schema) {
      const parsed = this.schema.safeParse(raw);
      if (!parsed.success) {
        return captureStreamError(
          new PermanentError(formatZodError(parsed.error, 'fields'), {
            deadReason: 'invalid-payload',
          }),
        );
      }
      fields = parsed.data;
    }
    const message: StreamMessage<F> = Object.freeze({
      stream,
      group,
      id: entry.id,
      fields,
      attempt: 1,
      deliveries: entry.deliveries,
      signal: this.aborting.signal,
    });
    try {
      await this.handler(message);
      return undefined;
    } catch (err) {
      return captureStreamError(err);
    }
  }

  /** The retry job (or dead job) of an entry, if its hand-off already happened. */
  private async handedOffJob(id: string): Promise<string | undefined> {
    const { stream, group } = this.config;
    const key = retryIdempotencyKey(stream, group, id);
    // Its key's id, or the earlier encoding's for a hand-off made before the upgrade.
    for (const jobId of [jobIdForKey(key), legacyJobIdForKey(key)])
      if (await this.retryQueue.hasJob(jobId)) return jobId;
    return (await this.dlq.get(key))?.id;
  }

  private report(err: unknown, message: string): void {
    this.logger.error({ err }, message);
    this.safeEmit(this.logger, 'error', err instanceof Error ? err : new Error(String(err)));
  }
}

/** Creates a stream consumer and, unless `autorun: false`, starts it. */
export function createStreamConsumer<F = StreamFields>(
  options: StreamConsumerOptions<F>,
): StreamConsumer<F> {
  return new StreamConsumer<F>(options);
}
