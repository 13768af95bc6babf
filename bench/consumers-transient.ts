/**
 * Broker consumers with 1 transient failure per message: every message's
 * first run throws, its second succeeds. requeue's consumers (retry after a
 * fixed delay, no jitter) against each broker's own retry tool:
 *
 * - RabbitMQ: the TTL + dead-letter-exchange ladder — the work queue
 *   dead-letters a rejected message (`basic.nack`, requeue = false) to a
 *   retry queue whose `x-message-ttl` is the delay and which dead-letters it
 *   back to the work queue.
 * - JetStream: the consumer's `backoff` list — the failed message is left
 *   unacknowledged, and JetStream redelivers it after `backoff[0]`. (A plain
 *   `nak` redelivers at once: BackOff applies to ack timeouts only,
 *   nats-server#5856.)
 *
 * Each side reports messages/s to all delivered (from the first message
 * handled to the last success) and each retry's lateness: when its second
 * run started, less (its first run's failure + the delay).
 */
import { randomUUID } from 'node:crypto';
import amqp from 'amqplib';
import { AckPolicy, connect as natsConnect, nanos, type JetStreamClient } from 'nats';
import { quantile } from '../src/util/stats.js';
import type * as AmqpTypes from '../workers/amqp/index.js';
import type * as NatsTypes from '../workers/nats/index.js';

/** requeue's consumer modules, from one build. */
export interface RequeueBuild {
  amqp: typeof AmqpTypes;
  nats: typeof NatsTypes;
}

/** What one side of the transient scenario measured. */
export interface TransientRun {
  rate: number;
  /** Each retry's lateness, ms, sorted. */
  lateness: number[];
}

/** The scenario's settings. */
export interface TransientSetup {
  count: number;
  concurrency: number;
  delayMs: number;
  amqpUrl: string;
  natsUrl: string;
  redisUrl: string;
  build: RequeueBuild;
}

const logger = { level: 'silent' } as const;

/** Fails each message's first run, and times the second against the first's failure + the delay. */
class Tracker {
  private readonly failedAt = new Map<number, number>();
  private readonly done = new Set<number>();
  private readonly lateness: number[] = [];
  private t0 = 0;
  private tEnd = 0;
  private finished: (() => void) | undefined;
  readonly allDone: Promise<void>;

  constructor(
    private readonly count: number,
    private readonly delayMs: number,
  ) {
    this.allDone = new Promise((resolve) => (this.finished = resolve));
  }

  /** Whether this run of message `i` fails. */
  run(i: number): boolean {
    const now = performance.now();
    if (this.t0 === 0) this.t0 = now;
    const failed = this.failedAt.get(i);
    if (failed === undefined) {
      this.failedAt.set(i, now);
      return true;
    }
    if (this.done.has(i)) return false;
    this.done.add(i);
    this.lateness.push(now - (failed + this.delayMs));
    this.tEnd = now;
    if (this.done.size === this.count) this.finished?.();
    return false;
  }

  result(): TransientRun {
    return {
      rate: (this.count * 1000) / (this.tEnd - this.t0),
      lateness: this.lateness.toSorted((a, b) => a - b),
    };
  }
}

const indexOf = (body: unknown): number => (body as { i: number }).i;

/** The fixed-delay policy requeue's sides use: the delay, no jitter. */
function fixedPolicy(delayMs: number) {
  return { strategy: 'fixed', baseMs: delayMs, capMs: delayMs, jitter: 0, maxAttempts: 3 } as const;
}

async function amqpQueue(setup: TransientSetup, args?: Record<string, unknown>) {
  const model = await amqp.connect(setup.amqpUrl);
  const ch = await model.createConfirmChannel();
  const queue = `bench-t-${randomUUID().slice(0, 8)}`;
  const retry = `${queue}-retry`;
  await ch.assertQueue(queue, {
    durable: true,
    ...(args && {
      arguments: { 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': retry },
    }),
  });
  if (args)
    await ch.assertQueue(retry, {
      durable: true,
      arguments: {
        'x-message-ttl': setup.delayMs,
        'x-dead-letter-exchange': '',
        'x-dead-letter-routing-key': queue,
      },
    });
  for (let i = 0; i < setup.count; i++)
    ch.sendToQueue(queue, Buffer.from(`{"i":${i}}`), { messageId: `m${i}`, persistent: true });
  await ch.waitForConfirms();
  const drop = async () => {
    await ch.deleteQueue(queue);
    if (args) await ch.deleteQueue(retry);
    await model.close();
  };
  return { model, queue, drop };
}

/** RabbitMQ's TTL + DLX ladder: reject → retry queue (TTL = delay) → back to the work queue. */
export async function amqpLadder(setup: TransientSetup): Promise<TransientRun> {
  const { model, queue, drop } = await amqpQueue(setup, {});
  const tracker = new Tracker(setup.count, setup.delayMs);
  const ch = await model.createChannel();
  await ch.prefetch(setup.concurrency);
  await ch.consume(queue, (msg) => {
    if (!msg) return;
    const i = indexOf(JSON.parse(msg.content.toString('utf8')));
    if (tracker.run(i)) ch.nack(msg, false, false);
    else ch.ack(msg);
  });
  await tracker.allDone;
  await ch.close();
  await drop();
  return tracker.result();
}

/** requeue/amqp: a failure is handed to requeue's retry queue, retried there after the delay. */
export async function amqpRequeue(setup: TransientSetup): Promise<TransientRun> {
  const { queue, drop } = await amqpQueue(setup);
  const tracker = new Tracker(setup.count, setup.delayMs);
  const handler = async (m: { body: unknown }) => {
    if (tracker.run(indexOf(m.body))) throw new Error('transient');
  };
  const { createAmqpConsumer, createAmqpRetryWorker } = setup.build.amqp;
  const policy = fixedPolicy(setup.delayMs);
  const connection = setup.redisUrl;
  const worker = createAmqpRetryWorker({
    queue,
    handler,
    connection,
    logger,
    concurrency: setup.concurrency,
  });
  const consumer = createAmqpConsumer({
    url: setup.amqpUrl,
    queue,
    handler,
    concurrency: setup.concurrency,
    connection,
    logger,
    policy,
    breaker: worker,
  });
  await tracker.allDone;
  await consumer.close({ timeoutMs: 5000 });
  await worker.close({ timeoutMs: 5000 });
  await drop();
  return tracker.result();
}

async function natsStream(setup: TransientSetup, backoff: boolean) {
  const nc = await natsConnect({ servers: setup.natsUrl });
  const jsm = await nc.jetstreamManager();
  const stream = `bench_t_${randomUUID().slice(0, 8)}`;
  await jsm.streams.add({ name: stream, subjects: [`${stream}.>`] });
  await jsm.consumers.add(stream, {
    durable_name: 'work',
    ack_policy: AckPolicy.Explicit,
    // Every message may be waiting for its retry at once: the default 1,000 would throttle.
    max_ack_pending: setup.count * 2,
    max_deliver: 5,
    ...(backoff && { backoff: [nanos(setup.delayMs)] }),
  });
  const js: JetStreamClient = nc.jetstream();
  for (let i = 0; i < setup.count; i += 500)
    await Promise.all(
      Array.from({ length: Math.min(500, setup.count - i) }, (_, k) =>
        js.publish(`${stream}.in`, `{"i":${i + k}}`),
      ),
    );
  const drop = async () => {
    await jsm.streams.delete(stream);
    await nc.close();
  };
  return { js, stream, drop };
}

/** JetStream's BackOff: a failed message is left unacknowledged; JetStream redelivers it after backoff[0]. */
export async function natsBackoff(setup: TransientSetup): Promise<TransientRun> {
  const { js, stream, drop } = await natsStream(setup, true);
  const tracker = new Tracker(setup.count, setup.delayMs);
  const consumer = await js.consumers.get(stream, 'work');
  const messages = await consumer.consume({ max_messages: setup.concurrency });
  void (async () => {
    for await (const m of messages) {
      const i = indexOf(JSON.parse(Buffer.from(m.data).toString('utf8')));
      if (!tracker.run(i)) m.ack();
    }
  })();
  await tracker.allDone;
  await messages.close();
  await drop();
  return tracker.result();
}

/** requeue/nats in `hand-off` or `nak` mode, with the fixed-delay policy. */
export async function natsRequeue(
  setup: TransientSetup,
  failureMode: 'hand-off' | 'nak',
): Promise<TransientRun> {
  const { stream, drop } = await natsStream(setup, false);
  const tracker = new Tracker(setup.count, setup.delayMs);
  const handler = async (m: { body: unknown }) => {
    if (tracker.run(indexOf(m.body))) throw new Error('transient');
  };
  const { createNatsConsumer, createNatsRetryWorker } = setup.build.nats;
  const connection = setup.redisUrl;
  const worker = createNatsRetryWorker({
    stream,
    consumer: 'work',
    handler,
    connection,
    logger,
    concurrency: setup.concurrency,
  });
  const consumer = createNatsConsumer({
    servers: setup.natsUrl,
    stream,
    consumer: 'work',
    handler,
    concurrency: setup.concurrency,
    connection,
    logger,
    policy: fixedPolicy(setup.delayMs),
    failureMode,
    breaker: worker,
  });
  await tracker.allDone;
  await consumer.close({ timeoutMs: 5000 });
  await worker.close({ timeoutMs: 5000 });
  await drop();
  return tracker.result();
}

/** Lateness quantile `q` of a run, ms. */
export function latenessAt(run: TransientRun, q: number): number {
  return quantile(run.lateness, q);
}

/** The scenario's sides, in the order each round runs them (reversed every other round). */
const sides = [
  {
    broker: 'RabbitMQ',
    name: 'requeue/amqp (hand-off, fixed 1 × delay)',
    run: (s: TransientSetup) => amqpRequeue(s),
  },
  {
    broker: 'RabbitMQ',
    name: 'TTL + DLX ladder (nack → retry queue, x-message-ttl = delay → work queue)',
    run: (s: TransientSetup) => amqpLadder(s),
  },
  {
    broker: 'JetStream',
    name: 'requeue/nats, hand-off mode (retry in requeue after the delay)',
    run: (s: TransientSetup) => natsRequeue(s, 'hand-off'),
  },
  {
    broker: 'JetStream',
    name: 'requeue/nats, nak mode (nak with the delay requeue computes)',
    run: (s: TransientSetup) => natsRequeue(s, 'nak'),
  },
  {
    broker: 'JetStream',
    name: 'consumer backoff = [delay], failed message left unacknowledged',
    run: (s: TransientSetup) => natsBackoff(s),
  },
] as const;

/**
 * Runs every side `repeats` times (order alternating) and returns the table
 * rows: median messages/s and the lateness quantiles of every retry of every
 * run together. `progress` gets one line per run.
 */
export async function transientTable(
  setup: TransientSetup,
  repeats: number,
  progress: (line: string) => void,
): Promise<string> {
  const runs = sides.map(() => [] as TransientRun[]);
  // Warm-up, untimed: each side once, on a tenth of the messages.
  for (const side of sides) await side.run({ ...setup, count: Math.ceil(setup.count / 10) });
  for (let r = 0; r < repeats; r++) {
    const order = sides.map((_, k) => k);
    if (r % 2 === 1) order.reverse();
    for (const k of order) {
      const got = await sides[k]!.run(setup);
      runs[k]!.push(got);
      progress(
        `${sides[k]!.broker}, ${sides[k]!.name} #${r + 1}: ${Math.round(got.rate)}/s, lateness p50 ${latenessAt(got, 0.5).toFixed(0)} ms, p99 ${latenessAt(got, 0.99).toFixed(0)} ms`,
      );
    }
  }
  const ms = (v: number) => `${v.toFixed(0)} ms`;
  return sides
    .map((side, k) => {
      const all: TransientRun = {
        rate: 0,
        lateness: runs[k]!.flatMap((x) => x.lateness).toSorted((a, b) => a - b),
      };
      const rates = runs[k]!.map((x) => x.rate).toSorted((a, b) => a - b);
      return `| ${side.broker} | ${side.name} | ${Math.round(quantile(rates, 0.5)).toLocaleString('en-US')} | ${ms(latenessAt(all, 0))} | ${ms(latenessAt(all, 0.5))} | ${ms(latenessAt(all, 0.99))} | ${ms(latenessAt(all, 1))} |`;
    })
    .join('\n');
}
