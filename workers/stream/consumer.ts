import { hostname } from 'node:os';
import { z } from 'zod';
import { libraryLogger, type Logger, type LoggerOption } from '../../src/config/logger.js';
import { formatZodError, parseConfig } from '../../src/config/env.js';
import { PermanentError } from '../../src/errors/permanent-error.js';
import { parseRetryPolicy, type RetryPolicyInput } from '../../src/policy/retry-policy.js';
import { resolveRedis, type RedisClient, type RedisLike } from '../../src/redis/connection.js';
import { DeadLetterQueue } from '../../src/scheduler/dead-letter.js';
import { TypedEmitter } from '../../src/scheduler/events.js';
import { jobIdForKey } from '../../src/scheduler/job-id.js';
import { createQueue, type RequeueQueue } from '../../src/scheduler/queue.js';
import { sleep, withDeadline } from '../../src/util/lifecycle.js';
import { systemClock, type Clock } from '../../src/util/system.js';
import type { StreamConsumerEvents } from './events.js';
import type { StreamFields, StreamHandler, StreamMessage } from './message.js';
import {
  captureStreamError,
  defaultRetryQueueName,
  retryIdempotencyKey,
  retryJobFor,
  type StreamError,
  type StreamRetryJobData,
} from './retry-job.js';
import * as commands from './stream-commands.js';
import type { Delivery } from './stream-commands.js';

/** The numeric and naming options of {@link createStreamConsumer}, validated in one place. */
export const streamConsumerConfigSchema = z
  .object({
    stream: z.string().min(1),
    group: z.string().min(1),
    /** @defaultValue `<hostname>-<pid>` */
    consumer: z.string().min(1).optional(),
    /** @defaultValue `<stream>.<group>.retry` (see `defaultRetryQueueName`) */
    retryQueue: z.string().min(1).optional(),
    /** Where a group created by the consumer starts reading. @defaultValue `'$'` (new entries only) */
    startId: z.string().min(1).default('$'),
    /** Entries per XREADGROUP / XAUTOCLAIM (COUNT). @defaultValue `32` */
    batchSize: z.int().min(1).default(32),
    /** Handlers run at once within a batch. @defaultValue `1` */
    concurrency: z.int().min(1).default(1),
    /** Longest wait of one XREADGROUP for new entries, in ms. @defaultValue `1000` */
    blockMs: z.int().min(1).default(1000),
    /** An entry pending this long without its consumer touching it is reclaimed, in ms. @defaultValue `30_000` */
    claimIdleMs: z.int().min(1).default(30_000),
    /** How often idle entries are looked for, in ms. @defaultValue `claimIdleMs / 2` */
    claimIntervalMs: z.int().min(1).optional(),
    /**
     * An entry delivered more often than this (its consumers kept dying on it)
     * is handed to the retry queue without running the handler in the stream
     * consumer. @defaultValue `3`
     */
    maxDeliveries: z.int().min(1).default(3),
    /** Wait after a Redis error before trying again, in ms. @defaultValue `1000` */
    errorBackoffMs: z.int().min(0).default(1000),
  })
  .strict();

/** Options of {@link createStreamConsumer}. */
export interface StreamConsumerOptions<F = StreamFields> extends z.input<
  typeof streamConsumerConfigSchema
> {
  /** Redis URL or connection (one Redis or a Cluster). @defaultValue `REDIS_URL` (a Cluster seed with `REDIS_CLUSTER=1`), else `redis://127.0.0.1:6379` */
  connection?: RedisLike;
  /** Runs each entry. */
  handler: StreamHandler<F>;
  /**
   * The retry policy stamped on every retry job, so the retry worker honours
   * it whichever process runs it. @defaultValue the retry worker's
   */
  policy?: RetryPolicyInput;
  /**
   * The fields must satisfy this. An entry that does not is handed off
   * without running the handler, and the retry worker (given the same
   * schema) dead-letters it with `invalid-payload`.
   */
  schema?: z.ZodType<F>;
  /** Start reading at once. @defaultValue `true` */
  autorun?: boolean;
  /** A pino logger or pino options. @defaultValue warnings and errors on stderr */
  logger?: LoggerOption;
  clock?: Clock;
}

/** The validated configuration of a consumer. */
type StreamConsumerConfig = z.output<typeof streamConsumerConfigSchema> & {
  consumer: string;
  retryQueue: string;
  claimIntervalMs: number;
};

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
  private readonly held = new Set<string>();
  private readonly toAck: string[] = [];
  private ackFlight: Promise<void> | undefined;
  private heartbeat: NodeJS.Timeout | undefined;

  constructor(options: StreamConsumerOptions<F>) {
    super();
    const { connection, handler, policy, schema, autorun = true, logger, clock, ...rest } = options;
    const parsed = parseConfig(streamConsumerConfigSchema, rest, 'streamConsumer');
    this.config = {
      ...parsed,
      consumer: parsed.consumer ?? `${hostname()}-${process.pid}`,
      retryQueue: parsed.retryQueue ?? defaultRetryQueueName(parsed.stream, parsed.group),
      claimIntervalMs: parsed.claimIntervalMs ?? Math.max(1, Math.round(parsed.claimIdleMs / 2)),
    };
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
   * Stops reading, lets the handlers already running finish for up to
   * `timeoutMs`, hands the batch's unstarted entries back to the group
   * (claimable at once), flushes acknowledgements and closes every connection
   * it opened. Handlers still running after the deadline see their `signal`
   * aborted; their entries stay pending and are reclaimed.
   */
  close({ timeoutMs = 30_000 }: { timeoutMs?: number } = {}): Promise<void> {
    this.closePromise ??= this.shutdown(timeoutMs);
    return this.closePromise;
  }

  private async shutdown(timeoutMs: number): Promise<void> {
    this.stopping.abort();
    const outcome = await withDeadline(this.loopPromise ?? Promise.resolve(), timeoutMs);
    if (outcome.kind === 'timeout') {
      this.aborting.abort();
      this.logger.warn(
        { timeoutMs },
        'handlers did not finish in time; their entries stay pending',
      );
    }
    this.stopHeartbeat();
    this.blocking.disconnect();
    await this.dlq.close();
    await this.retryQueue.close();
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
        await this.drainAcks();
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
      await this.drainAcks();
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
    const { stream, group, consumer, claimIdleMs, batchSize, claimIntervalMs } = this.config;
    const page = await commands.autoClaim(this.redis, {
      stream,
      group,
      consumer,
      minIdleMs: claimIdleMs,
      start: this.claimCursor,
      count: batchSize,
    });
    this.claimCursor = page.next;
    if (page.next === '0-0') this.nextClaimAt = this.clock.now() + claimIntervalMs;
    const first = page.entries[0];
    const last = page.entries[page.entries.length - 1];
    if (!first || !last) return;
    const ids = page.entries.map((e) => e.id);
    const counts = await commands.deliveryCounts(this.redis, {
      stream,
      group,
      consumer,
      first: first.id,
      last: last.id,
      count: page.entries.length + batchSize,
    });
    this.logger.info({ count: ids.length }, 'reclaimed idle entries');
    this.emit('messages:claimed', { stream, ids });
    // Missing from XPENDING (it cannot be, short of a race): assume a redelivery, which only
    // adds the check for an earlier hand-off.
    await this.processBatch(page.entries.map((e) => ({ ...e, deliveries: counts.get(e.id) ?? 2 })));
  }

  /** Runs a batch with bounded concurrency; on close, hands back the entries not started. */
  private async processBatch(entries: Delivery[]): Promise<void> {
    if (entries.length === 0) return;
    for (const entry of entries) this.held.add(entry.id);
    this.startHeartbeat();
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
      await this.release(entries.slice(next));
      await this.drainAcks();
    } finally {
      this.stopHeartbeat();
      // Entries not acknowledged by now (a failed hand-off) go idle and are reclaimed.
      this.held.clear();
    }
  }

  /**
   * Runs one entry. Never throws: an entry whose hand-off failed stays
   * pending, unacknowledged, and is reclaimed after `claimIdleMs`.
   */
  private async processEntry(entry: Delivery): Promise<void> {
    const { stream, group } = this.config;
    const log = this.logger.child({ streamId: entry.id, deliveries: entry.deliveries });
    try {
      if (entry.fields === undefined) {
        // Deleted from the stream while pending: nothing left to run.
        this.ack(entry.id);
        return;
      }
      if (entry.deliveries > 1) {
        const jobId = await this.handedOffJob(entry.id);
        if (jobId !== undefined) {
          log.info({ jobId }, 'already handed off before its consumer stopped; acknowledging');
          this.emit('message:already-handed-off', { stream, id: entry.id, jobId });
          this.ack(entry.id);
          return;
        }
      }
      const error = await this.attempt(entry, entry.fields);
      if (error === undefined) {
        this.emit('message:processed', { stream, id: entry.id, deliveries: entry.deliveries });
        this.ack(entry.id);
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
      this.emit('message:handed-off', {
        stream,
        id: entry.id,
        jobId: added.id,
        deliveries: entry.deliveries,
        error,
      });
      this.ack(entry.id);
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
    const jobId = jobIdForKey(retryIdempotencyKey(stream, group, id));
    const [live, dead] = await Promise.all([
      this.retryQueue.bull.getJob(jobId),
      this.dlq.get(jobId),
    ]);
    return live || dead ? jobId : undefined;
  }

  private ack(id: string): void {
    this.toAck.push(id);
    void this.flushAcks().catch(() => undefined);
  }

  /**
   * Sends the waiting acknowledgements: one XACK in flight at a time, each
   * carrying every entry finished meanwhile. Rejects if an XACK fails; its
   * ids wait for the next flush.
   */
  private flushAcks(): Promise<void> {
    if (this.ackFlight) return this.ackFlight;
    if (this.toAck.length === 0) return Promise.resolve();
    // sendAcks awaits before it clears ackFlight, so this assignment comes first.
    this.ackFlight = this.sendAcks();
    return this.ackFlight;
  }

  /** Flushes until nothing waits, the flights started meanwhile included. */
  private async drainAcks(): Promise<void> {
    while (this.ackFlight || this.toAck.length > 0) await this.flushAcks();
  }

  private async sendAcks(): Promise<void> {
    const { stream, group } = this.config;
    try {
      while (this.toAck.length > 0) {
        const ids = this.toAck.splice(0);
        try {
          await commands.ack(this.redis, { stream, group, ids });
        } catch (err) {
          this.toAck.unshift(...ids);
          throw err;
        }
        for (const id of ids) this.held.delete(id);
        this.emit('messages:acked', { stream, ids });
      }
    } finally {
      // In the same synchronous step as the last check: an ack queued after it starts a new flight.
      this.ackFlight = undefined;
    }
  }

  /** Hands unstarted entries back: idle enough to be claimed at once, delivery count unchanged. */
  private async release(entries: Delivery[]): Promise<void> {
    if (entries.length === 0) return;
    const { stream, group, consumer, claimIdleMs } = this.config;
    const byCount = new Map<number, string[]>();
    for (const e of entries)
      byCount.set(e.deliveries, [...(byCount.get(e.deliveries) ?? []), e.id]);
    for (const [deliveries, ids] of byCount) {
      // Out of `held` first, so no later heartbeat makes them fresh again.
      for (const id of ids) this.held.delete(id);
      await commands.touch(this.redis, {
        stream,
        group,
        consumer,
        ids,
        idleMs: claimIdleMs,
        retryCount: deliveries - 1,
      });
    }
    this.logger.info({ count: entries.length }, 'closing: handed unstarted entries back');
  }

  /** While a batch is held, resets its entries' idle time a few times per `claimIdleMs`. */
  private startHeartbeat(): void {
    if (this.heartbeat) return;
    const { stream, group, consumer, claimIdleMs } = this.config;
    this.heartbeat = setInterval(
      () => {
        const ids = [...this.held];
        commands.touch(this.redis, { stream, group, consumer, ids }).catch((err: unknown) => {
          this.report(err, 'could not refresh held entries');
        });
      },
      Math.max(1, Math.floor(claimIdleMs / 3)),
    );
    this.heartbeat.unref();
  }

  private stopHeartbeat(): void {
    clearInterval(this.heartbeat);
    this.heartbeat = undefined;
  }

  private report(err: unknown, message: string): void {
    this.logger.error({ err }, message);
    if (this.listenerCount('error') > 0) {
      this.emit('error', err instanceof Error ? err : new Error(String(err)));
    }
  }
}

/** Creates a stream consumer and, unless `autorun: false`, starts it. */
export function createStreamConsumer<F = StreamFields>(
  options: StreamConsumerOptions<F>,
): StreamConsumer<F> {
  return new StreamConsumer<F>(options);
}
