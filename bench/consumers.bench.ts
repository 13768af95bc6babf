/**
 * Broker consumers, healthy: messages/s of requeue's RabbitMQ consumer
 * (`requeue/amqp`, with its retry worker running beside it) against a plain
 * amqplib consumer with manual acks, and of requeue's JetStream consumer
 * (`requeue/nats`, hand-off mode) against a plain JetStream pull consumer
 * (`consumer.consume()`, `msg.ack()`). Same broker, same prefetch / pull size
 * (the concurrency), handlers that return at once, the sides alternating;
 * each run pre-loads its messages and is timed from the first message handled
 * to the last. Target ≥ 0.9×. Run with `npm run bench:consumers`;
 * writes its section of bench/RESULTS.md.
 */
import { randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import amqp from 'amqplib';
import { AckPolicy, connect as natsConnect } from 'nats';
import { Redis } from 'ioredis';
import { startRedisServer } from '../src/redis/redis-server.js';
import { createAmqpConsumer, createAmqpRetryWorker } from '../workers/amqp/index.js';
import { createNatsConsumer, createNatsRetryWorker } from '../workers/nats/index.js';
import { describeMachine } from './support/machine.js';
import { describeRevision } from './support/revision.js';
import { writeResultsSection } from './support/results-file.js';
import { formatRate, formatRatio, median, perSecond } from './support/stats.js';

const { values } = parseArgs({
  options: {
    messages: { type: 'string', default: '20000' },
    repeats: { type: 'string', default: '3' },
    concurrency: { type: 'string', default: '16' },
    'dry-run': { type: 'boolean', default: false },
  },
});
const count = Number(values.messages);
const repeats = Number(values.repeats);
const concurrency = Number(values.concurrency);
const amqpUrl = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const logger = { level: 'silent' } as const;
const startedAt = Date.now();
const loadAtStart = loadavg()[0] ?? 0;

const redisServer = await startRedisServer({ appendonly: false });
const redis = new Redis(redisServer.url);
const machine = await describeMachine(redis);

/** Resolves when `handled()` reaches `count`. */
function untilAll(handled: () => number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setInterval(() => {
      if (handled() >= count) {
        clearInterval(timer);
        resolve();
      }
    }, 2);
  });
}

async function amqpRun(side: 'requeue' | 'plain'): Promise<number> {
  const model = await amqp.connect(amqpUrl);
  const queue = `bench-${randomUUID().slice(0, 8)}`;
  const ch = await model.createConfirmChannel();
  await ch.assertQueue(queue, { durable: true });
  for (let i = 0; i < count; i++)
    ch.sendToQueue(queue, Buffer.from(`{"i":${i}}`), { messageId: `m${i}` });
  await ch.waitForConfirms();
  let handled = 0;
  let t0 = 0;
  // Timed from the first message handled: connecting and subscribing are not the throughput.
  const handler = async () => {
    if (handled === 0) t0 = performance.now();
    handled += 1;
  };
  // The plain consumers parse the JSON body, as requeue's hands it parsed.
  const plainHandler = async (content: Uint8Array) => {
    JSON.parse(Buffer.from(content).toString('utf8'));
    await handler();
  };
  if (side === 'plain') {
    const c = await model.createChannel();
    await c.prefetch(concurrency);
    await c.consume(queue, (msg) => {
      if (!msg) return;
      void plainHandler(msg.content).then(() => c.ack(msg));
    });
    await untilAll(() => handled);
    const ms = performance.now() - t0;
    await c.close();
    await ch.deleteQueue(queue);
    await model.close();
    return perSecond(count, ms);
  }
  const worker = createAmqpRetryWorker({ queue, handler, connection: redisServer.url, logger });
  const consumer = createAmqpConsumer({
    url: amqpUrl,
    queue,
    handler,
    concurrency,
    connection: redisServer.url,
    logger,
    breaker: worker,
  });
  await consumer.waitUntilReady();
  await untilAll(() => handled);
  const ms = performance.now() - t0;
  await consumer.close({ timeoutMs: 5000 });
  await worker.close({ timeoutMs: 5000 });
  await ch.deleteQueue(queue);
  await model.close();
  return perSecond(count, ms);
}

async function natsRun(side: 'requeue' | 'plain'): Promise<number> {
  const nc = await natsConnect({ servers: natsUrl });
  const jsm = await nc.jetstreamManager();
  const stream = `bench_${randomUUID().slice(0, 8)}`;
  await jsm.streams.add({ name: stream, subjects: [`${stream}.>`] });
  await jsm.consumers.add(stream, { durable_name: 'work', ack_policy: AckPolicy.Explicit });
  const js = nc.jetstream();
  for (let i = 0; i < count; i += 500)
    await Promise.all(
      Array.from({ length: Math.min(500, count - i) }, (_, k) =>
        js.publish(`${stream}.in`, `{"i":${i + k}}`),
      ),
    );
  let handled = 0;
  let t0 = 0;
  // Timed from the first message handled: connecting and subscribing are not the throughput.
  const handler = async () => {
    if (handled === 0) t0 = performance.now();
    handled += 1;
  };
  // The plain consumers parse the JSON body, as requeue's hands it parsed.
  const plainHandler = async (content: Uint8Array) => {
    JSON.parse(Buffer.from(content).toString('utf8'));
    await handler();
  };
  if (side === 'plain') {
    const consumer = await js.consumers.get(stream, 'work');
    const messages = await consumer.consume({ max_messages: concurrency });
    void (async () => {
      for await (const m of messages) void plainHandler(m.data).then(() => m.ack());
    })();
    await untilAll(() => handled);
    const ms = performance.now() - t0;
    await messages.close();
    await jsm.streams.delete(stream);
    await nc.close();
    return perSecond(count, ms);
  }
  const worker = createNatsRetryWorker({
    stream,
    consumer: 'work',
    handler,
    connection: redisServer.url,
    logger,
  });
  const consumer = createNatsConsumer({
    servers: natsUrl,
    stream,
    consumer: 'work',
    handler,
    concurrency,
    connection: redisServer.url,
    logger,
    breaker: worker,
  });
  await consumer.waitUntilReady();
  await untilAll(() => handled);
  const ms = performance.now() - t0;
  await consumer.close({ timeoutMs: 5000 });
  await worker.close({ timeoutMs: 5000 });
  await jsm.streams.delete(stream);
  await nc.close();
  return perSecond(count, ms);
}

interface Row {
  name: string;
  baseline: string;
  requeue: number[];
  plain: number[];
  ratios: number[];
}
const rows: Row[] = [
  {
    name: 'RabbitMQ, healthy',
    baseline: 'amqplib consume, prefetch = concurrency, ack per message',
    requeue: [],
    plain: [],
    ratios: [],
  },
  {
    name: 'JetStream, healthy',
    baseline: 'JetStream pull consumer.consume(), ack per message',
    requeue: [],
    plain: [],
    ratios: [],
  },
];
// Warm-up, untimed.
await amqpRun('plain');
await natsRun('plain');
for (let r = 0; r < repeats; r++) {
  for (const [row, runOf] of [
    [rows[0]!, amqpRun],
    [rows[1]!, natsRun],
  ] as const) {
    const order = r % 2 === 0 ? (['requeue', 'plain'] as const) : (['plain', 'requeue'] as const);
    const got: Record<string, number> = {};
    for (const side of order) got[side] = await runOf(side);
    row.requeue.push(got.requeue!);
    row.plain.push(got.plain!);
    row.ratios.push(got.requeue! / got.plain!);
    console.log(
      `${row.name} #${r + 1}: requeue ${formatRate(got.requeue!)}/s, plain ${formatRate(got.plain!)}/s`,
    );
  }
}
redis.disconnect();
await redisServer.stop();

const table = rows
  .map((row) => {
    const ratio = median(row.ratios);
    return `| ${row.name} | ${formatRate(median(row.requeue))} | ${formatRate(median(row.plain))} | ${formatRatio(ratio)} | ${formatRatio(Math.min(...row.ratios))}–${formatRatio(Math.max(...row.ratios))} | ≥ 0.90 | ${ratio >= 0.9 ? 'yes' : 'no'} |`;
  })
  .join('\n');
const body = `## Broker consumers: requeue/amqp and requeue/nats vs plain clients, healthy

Written by \`bench/consumers.bench.ts\` on ${new Date().toISOString()} (the run took ${Math.round((Date.now() - startedAt) / 1000)} s).

- Command: \`npm run bench:consumers → node --import tsx bench/consumers.bench.ts --messages ${count} --repeats ${repeats} --concurrency ${concurrency}\`; requeue at ${describeRevision(['src', 'workers'])}
- Machine: \`${machine.uname}\`; ${machine.cpuModel}, ${machine.cores} cores; 1-minute load average ${loadAtStart.toFixed(2)} at the start, ${(loadavg()[0] ?? 0).toFixed(2)} at the end
- Node ${machine.node}; RabbitMQ and NATS (JetStream) of the machine on loopback; requeue's retry queue on a private redis-server ${machine.redis}
- ${count} messages per run, pre-loaded; handlers return at once (the plain ones after parsing the JSON body, which requeue's hand their handler parsed); prefetch / pull size ${concurrency} on both sides; requeue's side runs its retry worker too (idle: nothing fails); median of ${repeats} runs per side after an untimed warm-up, the side that goes first alternating; a run is timed from its first message handled to its last (connecting and subscribing left out).

| scenario | requeue msgs/s | plain msgs/s | ratio | ratio range | target | met? |
| --- | --- | --- | --- | --- | --- | --- |
${table}

Baselines: ${rows.map((r) => `${r.name}: ${r.baseline}`).join('; ')}. Not measured yet: the issue's second comparison (1 transient failure per message against RabbitMQ's TTL + DLX ladder and JetStream's \`BackOff\`).`;
console.log(body);
if (!values['dry-run']) await writeResultsSection('bench/RESULTS.md', 'consumers-bench', body);
process.exit(0);
