import type { Consumer, ConsumerMessages, JsMsg, NatsConnection } from 'nats';
import type { z } from 'zod';
import { libraryLogger, type Logger } from '../../src/config/logger.js';
import {
  parseRetryPolicy,
  type RetryPolicy,
  type RetryPolicyInput,
} from '../../src/policy/retry-policy.js';
import { resolveRedis, type RedisClient } from '../../src/redis/connection.js';
import { DeadLetterQueue } from '../../src/scheduler/dlq/dead-letter-queue.js';
import { TypedEmitter } from '../../src/scheduler/events.js';
import { createQueue, type RequeueQueue } from '../../src/scheduler/queue.js';
import { sleep, withDeadline } from '../../src/util/lifecycle.js';
import { shutdownBudget } from '../../src/util/signals.js';
import { systemClock, systemRandom, type Clock, type Random } from '../../src/util/system.js';
import { watchBreaker } from '../consumer/breaker-watch.js';
import { handOffKey, type BrokerHandler, type BrokerJobData } from '../consumer/broker-message.js';
import type { BrokerConsumerEvents } from '../consumer/events.js';
import { findHandOff } from '../consumer/hand-off.js';
import { runBrokerAttempt } from '../consumer/run-attempt.js';
import {
  parseNatsConsumerConfig,
  type NatsConsumerConfig,
  type NatsConsumerOptions,
} from './consumer-config.js';
import { loadNats } from './load.js';
import { AckBatch } from './ack-batch.js';
import { decideNak } from './nak-decision.js';
import { readNatsMessage } from './read-message.js';

/**
 * Pulls from a JetStream durable consumer and runs a handler per message,
 * at most `concurrency` at once (each pull asks for the free slots only).
 *
 * - A success is acknowledged.
 * - A failure, in `hand-off` mode (the default), is stored in requeue's
 *   retry queue (idempotent by `nats/<stream>/<Nats-Msg-Id or hash>`) and
 *   only then acknowledged; requeue's retry worker runs the retries and
 *   dead-letters. In `nak` mode it is `nak`ed with requeue's computed delay
 *   and JetStream redelivers it; when requeue's policy (or the consumer's
 *   `max_deliver`) says dead, it is written to requeue's DLQ (through the
 *   retry queue) and only then `term`ed — never dropped unseen.
 * - While a handler runs its message is told `working()` so JetStream does
 *   not redeliver it past `ack_wait`.
 * - While the followed breaker is open no pull is made; messages already
 *   taken finish.
 *
 * What each mode loses under which crash: neither loses a message. `nak`
 * mode keeps the retry schedule in JetStream, so a consumer crash during a
 * handler redelivers after `ack_wait` (the delay just computed is lost: the
 * retry comes at `ack_wait`, not at the policy's time) and the attempt
 * history is only the delivery count; the schedule ignores requeue's breaker
 * deferrals and budget. `hand-off` mode keeps the full history and
 * requeue's exact schedule, and a crash between the hand-off and the ack
 * redelivers the message, which is recognised and only acknowledged.
 */
export class NatsConsumer<B = unknown> extends TypedEmitter<BrokerConsumerEvents> {
  readonly config: NatsConsumerConfig;
  readonly retryQueue: RequeueQueue<BrokerJobData>;
  private readonly redis: RedisClient;
  private readonly owned: boolean;
  private readonly dlq: DeadLetterQueue;
  private readonly handler: BrokerHandler<B>;
  private readonly schema: z.ZodType<B> | undefined;
  private readonly policyInput: RetryPolicyInput | undefined;
  private readonly policy: RetryPolicy;
  private readonly logger: Logger;
  private readonly clock: Clock;
  private readonly random: Random;
  private readonly stopping = new AbortController();
  private readonly aborting = new AbortController();
  private readonly inflight = new Set<Promise<void>>();
  private readonly unwatch: (() => void) | undefined;
  private nc: NatsConnection | undefined;
  private jsConsumer: Consumer | undefined;
  private maxDeliver = -1;
  private workingMs = 10_000;
  private paused = false;
  /** Messages whose handler runs: one timer tells them all `working()`. */
  private readonly running = new Set<JsMsg>();
  /** Acks of successes, sent together once per loop turn. */
  private readonly acks = new AckBatch();
  private workingTimer: NodeJS.Timeout | undefined;
  /** The running `consume()`: stopped on pause and close, which ends the loop's iteration. */
  private messages: ConsumerMessages | undefined;
  /** Wakes the loop waiting for a free slot (a handler settled, or closing started). */
  private slotFreed: (() => void) | undefined;
  private readyPromise: Promise<void> | undefined;
  private loopPromise: Promise<void> | undefined;
  private closePromise: Promise<void> | undefined;

  constructor(options: NatsConsumerOptions<B>) {
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
      random,
      ...rest
    } = options;
    this.config = parseNatsConsumerConfig(rest);
    this.policy = parseRetryPolicy(policy ?? {}, 'natsConsumer.policy');
    this.policyInput = policy;
    this.handler = handler;
    this.schema = schema;
    this.clock = clock ?? systemClock;
    this.random = random ?? systemRandom;
    const { stream, consumer, retryQueue } = this.config;
    this.logger = libraryLogger(logger).child({ natsStream: stream, natsConsumer: consumer });
    ({ redis: this.redis, owned: this.owned } = resolveRedis(connection));
    this.retryQueue = createQueue<BrokerJobData>(retryQueue, { connection: this.redis });
    this.dlq = new DeadLetterQueue(retryQueue, { connection: this.redis, clock: this.clock });
    this.unwatch = breaker
      ? watchBreaker(breaker, { pause: () => this.pause(), resume: () => this.resume() })
      : undefined;
    if (autorun) void this.waitUntilReady().catch(() => undefined);
  }

  /** Connects, finds the durable consumer and starts pulling (once). Rejects naming the servers when the first connection fails. */
  waitUntilReady(): Promise<void> {
    this.readyPromise ??= this.connect();
    return this.readyPromise;
  }

  /** Stops pulling until {@link resume}. */
  pause(): void {
    if (this.paused) return;
    this.paused = true;
    this.safeEmit(this.logger, 'consumer:paused', { source: this.config.stream });
    this.messages?.stop();
  }

  /** Pulls again after {@link pause}. */
  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.safeEmit(this.logger, 'consumer:resumed', { source: this.config.stream });
  }

  /**
   * Stops pulling, lets running handlers finish (most of `timeoutMs`; then
   * their `signal` aborts and JetStream redelivers their messages after
   * `ack_wait`), drains the connection and closes what it opened; returns
   * within `timeoutMs`.
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
    this.wakeLoop();
    this.unwatch?.();
    this.messages?.stop();
    const drained = await withDeadline(
      Promise.allSettled([this.loopPromise, ...this.inflight]),
      Math.floor(timeoutMs * 0.8),
    );
    if (drained.kind === 'timeout') {
      this.aborting.abort();
      this.logger.warn({ timeoutMs }, 'handlers did not finish in time; JetStream redelivers');
    }
    clearInterval(this.workingTimer);
    this.acks.flush();
    await withDeadline(
      Promise.allSettled([
        // Flushed first: the acks just sent are fire-and-forget.
        this.nc?.flush().then(() => this.nc?.close()),
        this.dlq.close(),
        this.retryQueue.close(),
      ]),
      budget.left(),
    );
    if (this.owned) this.redis.disconnect();
    this.logger.info('nats consumer stopped');
  }

  private async connect(): Promise<void> {
    const nats = await loadNats();
    const { servers, connectTimeoutMs, stream, consumer } = this.config;
    try {
      this.nc = await nats.connect({
        servers: servers.split(',').map((s) => s.trim()),
        timeout: connectTimeoutMs,
        maxReconnectAttempts: -1,
        name: this.config.worker,
      });
    } catch (err) {
      throw new Error(`cannot reach NATS at ${servers}: ${(err as Error).message}`, { cause: err });
    }
    if (this.closing) return void (await this.nc.close());
    let info;
    try {
      this.jsConsumer = await this.nc.jetstream().consumers.get(stream, consumer);
      info = await this.jsConsumer.info();
    } catch (err) {
      await this.nc.close().catch(() => undefined);
      throw new Error(
        `NATS at ${servers} has no JetStream consumer ${JSON.stringify(consumer)} on stream ${JSON.stringify(stream)}: ${(err as Error).message}`,
        { cause: err },
      );
    }
    this.maxDeliver = info.config.max_deliver ?? -1;
    if (
      this.config.failureMode === 'hand-off' &&
      this.maxDeliver > 0 &&
      this.maxDeliver <= this.config.maxDeliveries
    )
      this.logger.warn(
        { maxDeliver: this.maxDeliver, maxDeliveries: this.config.maxDeliveries },
        'max_deliver is not above maxDeliveries: a message whose consumers keep dying may be ' +
          'dropped by JetStream before it is handed off; set max_deliver to -1 or above maxDeliveries',
      );
    const ackWaitMs = Math.round((info.config.ack_wait ?? 30e9) / 1e6);
    this.workingMs = this.config.workingIntervalMs ?? Math.max(10, Math.floor(ackWaitMs / 3));
    this.workingTimer = setInterval(() => {
      for (const msg of this.running) msg.working();
    }, this.workingMs);
    this.workingTimer.unref();
    this.loopPromise = this.loop();
  }

  private async loop(): Promise<void> {
    const { concurrency, pullExpiresMs, errorBackoffMs } = this.config;
    while (!this.closing) {
      if (this.paused) {
        await sleep(100, this.stopping.signal);
        continue;
      }
      try {
        // Continuous pulls of up to `concurrency` messages, refilled as they are taken.
        const messages = await this.jsConsumer!.consume({
          max_messages: concurrency,
          expires: pullExpiresMs,
        });
        this.messages = messages;
        for await (const msg of messages) {
          // A slot frees when a handler settles (each run's promise never rejects).
          while (this.inflight.size >= concurrency && !this.closing)
            await new Promise<void>((resolve) => (this.slotFreed = resolve));
          if (this.closing || this.paused) {
            // Pulled before the pause or close: back to the stream unharmed.
            msg.nak();
            continue;
          }
          const run = this.process(msg).finally(() => {
            this.inflight.delete(run);
            this.wakeLoop();
          });
          this.inflight.add(run);
        }
      } catch (err) {
        if (this.closing) break;
        this.report(err, 'pull failed; retrying');
        await sleep(errorBackoffMs, this.stopping.signal);
      } finally {
        this.messages = undefined;
      }
    }
  }

  private wakeLoop(): void {
    const wake = this.slotFreed;
    this.slotFreed = undefined;
    wake?.();
  }

  /** Runs one message. Never throws: a message whose hand-off failed is `nak`ed back. */
  private async process(msg: JsMsg): Promise<void> {
    const { stream } = this.config;
    const read = readNatsMessage(stream, msg);
    // A child logger only where something is logged: the healthy path makes none.
    const log = () => this.logger.child({ messageKey: read.id, deliveries: read.deliveries });
    this.running.add(msg);
    try {
      if (msg.redelivered) {
        const jobId = await findHandOff(
          { retryQueue: this.retryQueue, dlq: this.dlq },
          handOffKey('nats', stream, read.id),
        );
        if (jobId !== undefined) {
          msg.ack();
          this.safeEmit(this.logger, 'message:already-handed-off', {
            source: stream,
            id: read.id,
            jobId,
          });
          return;
        }
      }
      const nakMode = this.config.failureMode === 'nak';
      const outcome = await runBrokerAttempt({
        read,
        handler: this.handler,
        schema: this.schema,
        maxBodyBytes: this.config.maxBodyBytes,
        // In nak mode the delivery count is the attempt count: requeue's policy judges it.
        maxDeliveries: nakMode ? Number.POSITIVE_INFINITY : this.config.maxDeliveries,
        consumer: this.config.worker,
        policy: this.policyInput,
        signal: this.aborting.signal,
        now: () => this.clock.now(),
        // In nak mode every delivery is an attempt of requeue's policy.
        ...(nakMode && { attempt: read.deliveries }),
      });
      if (outcome.kind === 'success') {
        // No closure per message unless someone listens.
        this.acks.ack(
          msg,
          this.listenerCount('message:processed') === 0
            ? undefined
            : () =>
                this.safeEmit(this.logger, 'message:processed', {
                  source: stream,
                  id: read.id,
                  deliveries: read.deliveries,
                }),
        );
        return;
      }
      const { job, error } = outcome;
      if (nakMode) {
        const decision = decideNak({
          error,
          deliveries: read.deliveries,
          publishedAt: Math.floor(Number(msg.info.timestampNanos) / 1e6),
          maxDeliver: this.maxDeliver,
          policy: this.policy,
          now: this.clock.now(),
          random: this.random,
        });
        if (decision.kind === 'retry') {
          msg.nak(decision.delayMs);
          this.safeEmit(this.logger, 'message:nacked', {
            source: stream,
            id: read.id,
            deliveries: read.deliveries,
            delayMs: decision.delayMs,
          });
          return;
        }
        job.data.brokerAttempt.dead = decision.reason;
      }
      const added = await this.retryQueue.add(job.name, job.data, job.opts);
      log().info({ jobId: added.id, err: error, dead: job.data.brokerAttempt.dead }, 'handed off');
      // Dead in nak mode: `term` (no reason: servers before 2.10 ignore a +TERM with one), so
      // JetStream stops redelivering; else a plain ack.
      if (job.data.brokerAttempt.dead !== undefined) msg.term();
      else msg.ack();
      this.safeEmit(this.logger, 'message:handed-off', {
        source: stream,
        id: read.id,
        jobId: added.id,
        deliveries: read.deliveries,
        error,
      });
    } catch (err) {
      this.report(err, 'could not settle the message; it goes back to the stream');
      try {
        msg.nak(this.config.errorBackoffMs);
      } catch {
        // The connection is gone: JetStream redelivers after ack_wait.
      }
    } finally {
      this.running.delete(msg);
    }
  }

  private report(err: unknown, message: string): void {
    this.logger.error({ err }, message);
    this.safeEmit(this.logger, 'error', err instanceof Error ? err : new Error(String(err)));
  }
}

/** Creates a JetStream consumer and, unless `autorun: false`, connects and starts pulling. */
export function createNatsConsumer<B = unknown>(options: NatsConsumerOptions<B>): NatsConsumer<B> {
  return new NatsConsumer<B>(options);
}
