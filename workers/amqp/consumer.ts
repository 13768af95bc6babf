import type { Channel, ChannelModel, ConsumeMessage } from 'amqplib';
import type { z } from 'zod';
import { libraryLogger, type Logger } from '../../src/config/logger.js';
import { parseRetryPolicy, type RetryPolicyInput } from '../../src/policy/retry-policy.js';
import { resolveRedis, type RedisClient } from '../../src/redis/connection.js';
import { DeadLetterQueue } from '../../src/scheduler/dlq/dead-letter-queue.js';
import { TypedEmitter } from '../../src/scheduler/events.js';
import { createQueue, type RequeueQueue } from '../../src/scheduler/queue.js';
import { sleep, withDeadline } from '../../src/util/lifecycle.js';
import { redactUrl } from '../../src/util/redact.js';
import { shutdownBudget } from '../../src/util/signals.js';
import { systemClock, type Clock } from '../../src/util/system.js';
import { watchBreaker } from '../consumer/breaker-watch.js';
import { type BrokerJobData, type BrokerHandler, handOffKey } from '../consumer/broker-message.js';
import type { BrokerConsumerEvents } from '../consumer/events.js';
import { findHandOff } from '../consumer/hand-off.js';
import { runBrokerAttempt } from '../consumer/run-attempt.js';
import {
  parseAmqpConsumerConfig,
  type AmqpConsumerConfig,
  type AmqpConsumerOptions,
} from './consumer-config.js';
import { loadAmqplib } from './load.js';
import { readAmqpMessage } from './read-message.js';

/**
 * Consumes an AMQP queue (RabbitMQ, classic or quorum) with manual acks and
 * prefetch = `concurrency`, and runs a handler per message.
 *
 * - A success is acknowledged.
 * - A failure is handed to the retry queue (a requeue queue, idempotent by
 *   `amqp/<queue>/<message id or hash>`) and acknowledged only once that add
 *   has resolved: a crash in between redelivers the message, and the
 *   redelivery finds the hand-off and only acknowledges it.
 * - Permanent errors and exhausted policies reach requeue's DLQ through the
 *   retry worker (`createAmqpRetryWorker`), with the full history.
 * - While the followed breaker is open the consumer cancels its subscription
 *   (basic.cancel); deliveries not started are rejected back to the queue
 *   (requeue = true) unharmed, and it subscribes again when the breaker
 *   half-opens or closes.
 * - A lost connection is re-made after `errorBackoffMs`; the broker returns
 *   the unacknowledged messages to the queue itself.
 *
 * Delivery is at least once: a handler can run twice for a message whose
 * consumer died during the handler or before its ack reached the broker.
 */
export class AmqpConsumer<B = unknown> extends TypedEmitter<BrokerConsumerEvents> {
  readonly config: AmqpConsumerConfig;
  readonly retryQueue: RequeueQueue<BrokerJobData>;
  private readonly redis: RedisClient;
  private readonly owned: boolean;
  private readonly dlq: DeadLetterQueue;
  private readonly handler: BrokerHandler<B>;
  private readonly schema: z.ZodType<B> | undefined;
  private readonly policy: RetryPolicyInput | undefined;
  private readonly logger: Logger;
  private readonly clock: Clock;
  private readonly stopping = new AbortController();
  private readonly aborting = new AbortController();
  private readonly inflight = new Set<Promise<void>>();
  private readonly unwatch: (() => void) | undefined;
  private connection: ChannelModel | undefined;
  private channel: Channel | undefined;
  private consumerTag: string | undefined;
  private paused = false;
  private reconnecting = false;
  private readyPromise: Promise<void> | undefined;
  private closePromise: Promise<void> | undefined;

  constructor(options: AmqpConsumerOptions<B>) {
    super();
    const {
      connection,
      handler,
      policy,
      schema,
      breaker,
      autorun = true,
      logger,
      clock,
      ...rest
    } = options;
    this.config = parseAmqpConsumerConfig(rest);
    if (policy !== undefined) parseRetryPolicy(policy, 'amqpConsumer.policy');
    this.policy = policy;
    this.handler = handler;
    this.schema = schema;
    this.clock = clock ?? systemClock;
    const { queue, consumer, retryQueue } = this.config;
    this.logger = libraryLogger(logger).child({ amqpQueue: queue, consumer });
    ({ redis: this.redis, owned: this.owned } = resolveRedis(connection));
    this.retryQueue = createQueue<BrokerJobData>(retryQueue, { connection: this.redis });
    this.dlq = new DeadLetterQueue(retryQueue, { connection: this.redis, clock: this.clock });
    this.unwatch = breaker
      ? watchBreaker(breaker, { pause: () => this.pause(), resume: () => this.resume() })
      : undefined;
    if (autorun) void this.waitUntilReady().catch(() => undefined);
  }

  /**
   * Connects and subscribes (once; later calls return the same promise).
   * Rejects when the first connection fails, naming the broker (its URL
   * without credentials); later losses are re-made by the consumer itself.
   */
  waitUntilReady(): Promise<void> {
    this.readyPromise ??= this.connect();
    return this.readyPromise;
  }

  /** Stops taking deliveries (basic.cancel) until {@link resume}. */
  pause(): void {
    if (this.paused) return;
    this.paused = true;
    this.safeEmit(this.logger, 'consumer:paused', { source: this.config.queue });
    void this.cancel();
  }

  /** Takes deliveries again after {@link pause}. */
  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.safeEmit(this.logger, 'consumer:resumed', { source: this.config.queue });
    if (this.channel && !this.closing)
      void this.subscribe(this.channel).catch((err) => {
        this.report(err, 'could not subscribe again');
      });
  }

  /**
   * Cancels the subscription, lets running handlers finish (most of
   * `timeoutMs`; then their `signal` aborts), closes the channel and the
   * connection — the broker returns what is unacknowledged — and the
   * connections it opened; returns within `timeoutMs`.
   */
  close({ timeoutMs = 30_000 }: { timeoutMs?: number } = {}): Promise<void> {
    this.closePromise ??= this.shutdown(timeoutMs);
    return this.closePromise;
  }

  private get closing(): boolean {
    return this.stopping.signal.aborted;
  }

  private async shutdown(timeoutMs: number): Promise<void> {
    const budget = shutdownBudget(timeoutMs, this.clock);
    this.stopping.abort();
    this.unwatch?.();
    await withDeadline(this.cancel(), Math.floor(timeoutMs * 0.2));
    const drained = await withDeadline(
      Promise.allSettled([...this.inflight]),
      Math.floor(budget.left() * 0.8),
    );
    if (drained.kind === 'timeout') {
      this.aborting.abort();
      this.logger.warn({ timeoutMs }, 'handlers did not finish in time; the broker redelivers');
    }
    await withDeadline(
      Promise.allSettled([this.connection?.close(), this.dlq.close(), this.retryQueue.close()]),
      budget.left(),
    );
    if (this.owned) this.redis.disconnect();
    this.logger.info('amqp consumer stopped');
  }

  private async connect(): Promise<void> {
    const amqp = await loadAmqplib();
    const { url, connectTimeoutMs, concurrency } = this.config;
    let model: ChannelModel;
    try {
      model = await amqp.connect(url, {
        timeout: connectTimeoutMs,
        // Nagle's algorithm left on (amqplib's default): with it off every ack is its own
        // packet, about 3 µs more system time per message (bench/consumers.bench.ts).
        clientProperties: {
          connection_name: this.config.connectionName ?? `requeue ${this.config.consumer}`,
        },
      });
    } catch (err) {
      throw new Error(
        `cannot reach the AMQP broker at ${redactUrl(url)}: ${(err as Error).message}`,
        { cause: err },
      );
    }
    if (this.closing) return void (await model.close().catch(() => undefined));
    model.on('error', (err: Error) => this.report(err, 'amqp connection error'));
    let channel: Channel;
    try {
      channel = await model.createChannel();
      channel.on('error', (err: Error) => this.report(err, 'amqp channel error'));
      await channel.prefetch(concurrency);
      await channel.checkQueue(this.config.queue);
    } catch (err) {
      // E.g. no such queue: this connection is dropped, not left open beside the next try.
      await model.close().catch(() => undefined);
      throw new Error(
        `the AMQP broker at ${redactUrl(url)} refused queue ${JSON.stringify(this.config.queue)}: ${(err as Error).message}`,
        { cause: err },
      );
    }
    if (this.closing) return void (await model.close().catch(() => undefined));
    this.connection = model;
    this.channel = channel;
    model.on('close', () => {
      if (this.connection !== model) return;
      this.connection = undefined;
      this.channel = undefined;
      this.consumerTag = undefined;
      if (!this.closing) void this.reconnect();
    });
    if (!this.paused) await this.subscribe(channel);
  }

  private async reconnect(): Promise<void> {
    if (this.reconnecting) return;
    this.reconnecting = true;
    try {
      await this.reconnectLoop();
    } finally {
      this.reconnecting = false;
    }
  }

  private async reconnectLoop(): Promise<void> {
    while (!this.closing) {
      await sleep(this.config.errorBackoffMs, this.stopping.signal);
      if (this.closing) return;
      try {
        await this.connect();
        this.logger.info('amqp connection re-made');
        return;
      } catch (err) {
        this.report(err, 'cannot reconnect to the AMQP broker; retrying');
      }
    }
  }

  private async subscribe(channel: Channel): Promise<void> {
    if (this.consumerTag !== undefined || this.paused || this.closing) return;
    const reply = await channel.consume(
      this.config.queue,
      (msg) => {
        if (msg === null) {
          // The broker cancelled us (queue deleted): subscribe again once it exists.
          this.consumerTag = undefined;
          this.report(new Error('the broker cancelled the subscription'), 'subscription cancelled');
          this.connection?.close().catch(() => undefined);
          return;
        }
        this.deliver(channel, msg);
      },
      { noAck: false },
    );
    this.consumerTag = reply.consumerTag;
  }

  private async cancel(): Promise<void> {
    const tag = this.consumerTag;
    this.consumerTag = undefined;
    if (tag === undefined || !this.channel) return;
    try {
      await this.channel.cancel(tag);
    } catch (err) {
      this.report(err, 'basic.cancel failed');
    }
  }

  private deliver(channel: Channel, msg: ConsumeMessage): void {
    if (this.paused || this.closing) {
      // Not started: back to the queue as it was.
      this.settle(channel, msg, 'requeue');
      return;
    }
    const run = this.process(channel, msg).finally(() => this.inflight.delete(run));
    this.inflight.add(run);
  }

  /** Runs one message. Never throws: a message whose hand-off failed goes back to the queue. */
  private async process(channel: Channel, msg: ConsumeMessage): Promise<void> {
    const { queue } = this.config;
    const read = readAmqpMessage(queue, msg);
    // A child logger only where something is logged: the healthy path makes none.
    const log = () => this.logger.child({ messageKey: read.id, deliveries: read.deliveries });
    try {
      if (msg.fields.redelivered) {
        const jobId = await findHandOff(
          { retryQueue: this.retryQueue, dlq: this.dlq },
          handOffKey('amqp', queue, read.id),
        );
        if (jobId !== undefined) {
          if (this.settle(channel, msg, 'ack'))
            this.safeEmit(this.logger, 'message:already-handed-off', {
              source: queue,
              id: read.id,
              jobId,
            });
          return;
        }
      }
      const outcome = await runBrokerAttempt({
        read,
        handler: this.handler,
        schema: this.schema,
        maxBodyBytes: this.config.maxBodyBytes,
        maxDeliveries: this.config.maxDeliveries,
        consumer: this.config.consumer,
        policy: this.policy,
        signal: this.aborting.signal,
        now: () => this.clock.now(),
      });
      if (outcome.kind === 'success') {
        if (this.settle(channel, msg, 'ack'))
          this.safeEmit(this.logger, 'message:processed', {
            source: queue,
            id: read.id,
            deliveries: read.deliveries,
          });
        return;
      }
      const { job } = outcome;
      const added = await this.retryQueue.add(job.name, job.data, job.opts);
      log().info({ jobId: added.id, err: job.data.brokerAttempt.error }, 'handed off');
      if (this.settle(channel, msg, 'ack'))
        this.safeEmit(this.logger, 'message:handed-off', {
          source: queue,
          id: read.id,
          jobId: added.id,
          deliveries: read.deliveries,
          error: job.data.brokerAttempt.error,
        });
    } catch (err) {
      this.report(err, 'could not hand the message off; it goes back to the queue');
      await sleep(this.config.errorBackoffMs, this.stopping.signal);
      this.settle(channel, msg, 'requeue');
    }
  }

  /** Acks or requeues on the channel the message came on; false when that channel is gone (the broker redelivers). */
  private settle(channel: Channel, msg: ConsumeMessage, how: 'ack' | 'requeue'): boolean {
    if (channel !== this.channel) return false;
    try {
      if (how === 'ack') channel.ack(msg);
      else channel.nack(msg, false, true);
      return true;
    } catch (err) {
      this.report(err, 'the channel closed before the message was settled; the broker redelivers');
      return false;
    }
  }

  private report(err: unknown, message: string): void {
    this.logger.error({ err }, message);
    this.safeEmit(this.logger, 'error', err instanceof Error ? err : new Error(String(err)));
  }
}

/** Creates an AMQP consumer and, unless `autorun: false`, connects and subscribes. */
export function createAmqpConsumer<B = unknown>(options: AmqpConsumerOptions<B>): AmqpConsumer<B> {
  return new AmqpConsumer<B>(options);
}
