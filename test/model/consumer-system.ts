/**
 * The real system one consumer-model run drives (test/model/consumer.model.ts):
 * a RabbitMQ queue (in the suite's own vhost, so a broker-side close touches
 * no one else) or a JetStream stream on the machine's brokers, unique per run
 * and deleted after it; 1–2 consumer processes (test/fixtures/broker-chaos-consumer.ts:
 * a `requeue/amqp` or `requeue/nats` consumer and its retry worker) that can
 * be SIGKILLed and restarted; the suite's Redis, flushed after each run.
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import amqp, { type ChannelModel } from 'amqplib';
import { Redis } from 'ioredis';
import type { NatsConnection } from 'nats';
import type { RedisServerHandle } from '../../src/redis/redis-server.js';
import { DeadLetterQueue } from '../../src/scheduler/dlq/dead-letter-queue.js';
import { createQueue, type RequeueQueue } from '../../src/scheduler/queue.js';
import { defaultAmqpRetryQueue } from '../../workers/amqp/index.js';
import { defaultNatsRetryQueue } from '../../workers/nats/index.js';
import { ConsumerProcesses } from '../chaos/broker-harness.js';
import { amqpUrl } from '../harness/amqp.js';
import { consumerCounts, deleteStream, makeStream, natsTestConnection } from '../harness/nats.js';

/** What one run is made with; generated with the commands. */
export interface ConsumerRunConfig {
  broker: 'amqp' | 'nats';
  /** Consumer processes (each a consumer and a retry worker). */
  processes: number;
  concurrency: number;
  /** amqp: the queue's type. */
  queueType: 'quorum' | 'classic';
  /** nats: how process 1 retries (process 0 always hands off). */
  natsMode: 'hand-off' | 'nak';
  /** Each handler run takes a random 0..handlerMs ms: long enough that SIGKILLs and closes hit running work. */
  handlerMs: number;
}

/** One published message and its planned outcome (the fixture's body). */
export interface PlannedMessage {
  n: number;
  /** Attempts that fail transiently before one succeeds. */
  fail: number;
  permanent: boolean;
  /** Permanent until the model "fixes" it and replays it from the DLQ. */
  heal: boolean;
  /** Published with a message id; else the consumer dedupes on a hash of body + properties. */
  withId: boolean;
}

/** The suite's vhost: created once, deleted after the suite. */
export const modelVhost = `requeue-model-${process.pid}`;

/** Creates the suite's vhost (guest may use it). */
export function createModelVhost(): void {
  execFileSync('rabbitmqctl', ['add_vhost', modelVhost], { stdio: 'pipe' });
  execFileSync('rabbitmqctl', ['set_permissions', '-p', modelVhost, 'guest', '.*', '.*', '.*'], {
    stdio: 'pipe',
  });
}

/** Deletes the suite's vhost and everything in it. */
export function deleteModelVhost(): void {
  execFileSync('rabbitmqctl', ['delete_vhost', modelVhost], { stdio: 'pipe' });
}

const vhostUrl = `${amqpUrl.replace(/\/$/, '')}/${encodeURIComponent(modelVhost)}`;
const natsServers = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const durable = 'work';

/** One run's source, retry queue, DLQ and processes. */
export class ConsumerSystem {
  readonly id = randomUUID().slice(0, 8);
  readonly prefix = `model-c-${this.id}`;
  /** The queue or stream (a stream name may not hold `-`). */
  readonly source: string;
  readonly retryQueue: string;
  readonly redis: Redis;
  readonly retries: RequeueQueue;
  readonly dlq: DeadLetterQueue;
  readonly journal: string[] = [];
  private readonly procs: ConsumerProcesses[] = [];
  private amqpModel: ChannelModel | undefined;
  private nc: NatsConnection | undefined;

  constructor(
    server: RedisServerHandle,
    readonly config: ConsumerRunConfig,
  ) {
    this.source = config.broker === 'amqp' ? this.prefix : `model_c_${this.id}`;
    this.retryQueue =
      config.broker === 'amqp'
        ? defaultAmqpRetryQueue(this.source)
        : defaultNatsRetryQueue(this.source, durable);
    this.redis = new Redis(server.url, { maxRetriesPerRequest: null });
    this.redis.on('error', () => undefined);
    this.retries = createQueue(this.retryQueue, { connection: server.url });
    this.dlq = new DeadLetterQueue(this.retryQueue, { connection: server.url });
    const env = {
      BROKER: config.broker,
      REDIS_URL: server.url,
      PREFIX: this.prefix,
      SOURCE: this.source,
      DURABLE: durable,
      BROKER_URL: config.broker === 'amqp' ? vhostUrl : natsServers,
      CONCURRENCY: String(config.concurrency),
      HANDLER_MS: String(config.handlerMs),
    };
    for (let i = 0; i < config.processes; i += 1) {
      const mode = i === 0 ? 'hand-off' : config.natsMode;
      this.procs.push(new ConsumerProcesses({ ...env, NATS_MODE: mode }));
    }
  }

  /** Makes the source and starts the processes. */
  async start(): Promise<void> {
    if (this.config.broker === 'amqp') {
      this.amqpModel = await amqp.connect(vhostUrl);
      this.amqpModel.on('error', () => undefined);
      const ch = await this.amqpModel.createChannel();
      await ch.assertQueue(this.source, {
        durable: true,
        arguments: { 'x-queue-type': this.config.queueType },
      });
      await ch.close();
    } else {
      this.nc = await natsTestConnection(natsServers);
      await makeStream(this.nc, this.source, durable, { ackWaitMs: 2_000 });
    }
    await Promise.all(this.procs.map((p) => p.start(0)));
    this.journal.push(`${this.config.processes} consumer process(es) started`);
  }

  /** Publishes the messages (confirmed by the broker before it returns). */
  async publish(messages: readonly PlannedMessage[]): Promise<void> {
    const body = (m: PlannedMessage) =>
      Buffer.from(JSON.stringify({ n: m.n, fail: m.fail, permanent: m.permanent, heal: m.heal }));
    if (this.config.broker === 'amqp') {
      // A broker-side close took the previous connection: open a new one.
      const ch = await this.amqpChannel();
      for (const m of messages)
        ch.sendToQueue(this.source, body(m), {
          persistent: true,
          ...(m.withId && { messageId: `m${m.n}` }),
        });
      await ch.waitForConfirms();
      await ch.close();
    } else {
      const js = this.nc!.jetstream();
      for (const m of messages)
        await js.publish(`${this.source}.in`, body(m), m.withId ? { msgID: `m${m.n}` } : {});
    }
    this.journal.push(`published ${messages.map((m) => JSON.stringify(m)).join(' ')}`);
  }

  private async amqpChannel() {
    try {
      return await this.amqpModel!.createConfirmChannel();
    } catch {
      this.amqpModel = await amqp.connect(vhostUrl);
      this.amqpModel.on('error', () => undefined);
      return this.amqpModel.createConfirmChannel();
    }
  }

  /** SIGKILLs process `index` and starts it again. */
  async crash(index: number): Promise<void> {
    const i = index % this.procs.length;
    await this.procs[i]!.crash(0);
    this.journal.push(`process ${i} SIGKILLed and restarted`);
  }

  /** amqp: the broker closes every connection of the suite's vhost (this run's). */
  closeConnections(): void {
    execFileSync(
      'rabbitmqctl',
      ['close_all_connections', '--vhost', modelVhost, '--limit', '100', 'requeue model'],
      { stdio: 'pipe' },
    );
    this.journal.push('broker closed every connection');
  }

  /** Consumer processes that exited without being killed. */
  unexpectedExits(): number {
    return this.procs.reduce((a, p) => a + p.unexpectedExits, 0);
  }

  /** SIGTERMs the processes (a graceful stop: unacked messages go back to the broker). */
  async stopProcesses(): Promise<void> {
    await Promise.all(this.procs.map((p) => p.stop()));
  }

  /** What the broker still holds: ready (or pending) and unacknowledged. */
  async sourceLeft(): Promise<{ left: number; unacked: number }> {
    if (this.config.broker === 'amqp') {
      // Asked with every consumer stopped: an unacked message is back in the count.
      const ch = await (await this.amqpFresh()).createChannel();
      const q = await ch.checkQueue(this.source);
      await ch.close();
      return { left: q.messageCount, unacked: 0 };
    }
    const c = await consumerCounts(this.nc!, this.source, durable);
    return { left: c.pending, unacked: c.ackPending };
  }

  private async amqpFresh(): Promise<ChannelModel> {
    await this.amqpModel?.close().catch(() => undefined);
    this.amqpModel = await amqp.connect(vhostUrl);
    this.amqpModel.on('error', () => undefined);
    return this.amqpModel;
  }

  /** Jobs of the retry queue not yet finished. */
  async openRetries(): Promise<number> {
    const c = await this.retries.bull.getJobCounts('wait', 'delayed', 'active', 'prioritized');
    return Object.values(c).reduce((a, b) => a + b, 0);
  }

  /** Stops everything, deletes the source and empties Redis for the next run. */
  async stop(): Promise<void> {
    await Promise.allSettled(this.procs.map((p) => p.stop()));
    if (this.config.broker === 'amqp') {
      const model = await this.amqpFresh().catch(() => undefined);
      const ch = await model?.createChannel().catch(() => undefined);
      await ch?.deleteQueue(this.source).catch(() => undefined);
      await model?.close().catch(() => undefined);
    } else if (this.nc) {
      await deleteStream(this.nc, this.source);
      await this.nc.close();
    }
    await Promise.allSettled([this.retries.close(), this.dlq.close()]);
    await this.redis.flushall();
    this.redis.disconnect();
  }
}
