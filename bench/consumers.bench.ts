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
import type * as AmqpTypes from '../workers/amqp/index.js';
import type * as NatsTypes from '../workers/nats/index.js';
import { startRedisServer } from '../src/redis/redis-server.js';
import { describeMachine } from './support/machine.js';
import { describeRevision } from './support/revision.js';
import { writeResultsSection } from './support/results-file.js';
import { transientTable } from './consumers-transient.js';
import { formatRate, formatRatio, median, perSecond } from './support/stats.js';

// requeue as it ships (the tsc build `npm run bench:consumers` makes first), not through tsx,
// whose keepNames transform adds a call per closure made.
type AmqpModule = typeof AmqpTypes;
type NatsModule = typeof NatsTypes;
async function requeueAt(root: string): Promise<{ amqp: AmqpModule; nats: NatsModule }> {
  return {
    amqp: (await import(`${root}/dist/workers/amqp/index.js`)) as AmqpModule,
    nats: (await import(`${root}/dist/workers/nats/index.js`)) as NatsModule,
  };
}

const { values } = parseArgs({
  options: {
    messages: { type: 'string', default: '20000' },
    repeats: { type: 'string', default: '5' },
    concurrency: { type: 'string', default: '16' },
    'dry-run': { type: 'boolean', default: false },
    /** `healthy` (every message succeeds) or `transient` (each fails once, then succeeds). */
    scenario: { type: 'string', default: 'healthy' },
    /** The transient scenario's retry delay. */
    'delay-ms': { type: 'string', default: '1000' },
    /** Another build's root (its `dist/`): a third side, e.g. main before a change, in the same run. */
    before: { type: 'string' },
  },
});
type Side = 'requeue' | 'plain' | 'before';
const beforeNote = process.env.BENCH_BEFORE_NOTE ?? 'another build';
const builds: Partial<Record<Side, { amqp: AmqpModule; nats: NatsModule }>> = {
  requeue: await requeueAt('..'),
  ...(values.before !== undefined && { before: await requeueAt(values.before) }),
};
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
if (values.scenario !== 'healthy' && values.scenario !== 'transient')
  throw new Error(`--scenario: healthy or transient, not ${values.scenario}`);
if (values.scenario === 'transient') {
  const delayMs = Number(values['delay-ms']);
  const table = await transientTable(
    {
      count,
      concurrency,
      delayMs,
      amqpUrl,
      natsUrl,
      redisUrl: redisServer.url,
      build: builds.requeue!,
    },
    repeats,
    (line) => console.log(line),
  );
  redis.disconnect();
  await redisServer.stop();
  const body = transientBody({ table, delayMs, machine });
  console.log(body);
  if (!values['dry-run'])
    await writeResultsSection('bench/RESULTS.md', 'consumers-transient-bench', body);
  process.exit(0);
}

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

/** One run's messages/s, and this process's CPU time (user + system) per message, µs. */
interface Run {
  rate: number;
  cpuUs: number;
}

async function amqpRun(side: Side): Promise<Run> {
  const model = await amqp.connect(amqpUrl);
  const queue = `bench-${randomUUID().slice(0, 8)}`;
  const ch = await model.createConfirmChannel();
  await ch.assertQueue(queue, { durable: true });
  for (let i = 0; i < count; i++)
    ch.sendToQueue(queue, Buffer.from(`{"i":${i}}`), { messageId: `m${i}` });
  await ch.waitForConfirms();
  let handled = 0;
  let t0 = 0;
  let cpu0 = process.cpuUsage();
  // Timed from the first message handled: connecting and subscribing are not the throughput.
  const handler = async () => {
    if (handled === 0) {
      t0 = performance.now();
      cpu0 = process.cpuUsage();
    }
    handled += 1;
  };
  const result = (): Run => {
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    return { rate: perSecond(count, ms), cpuUs: (cpu.user + cpu.system) / count };
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
    const run = result();
    await c.close();
    await ch.deleteQueue(queue);
    await model.close();
    return run;
  }
  const { createAmqpConsumer, createAmqpRetryWorker } = builds[side]!.amqp;
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
  const run = result();
  await consumer.close({ timeoutMs: 5000 });
  await worker.close({ timeoutMs: 5000 });
  await ch.deleteQueue(queue);
  await model.close();
  return run;
}

async function natsRun(side: Side): Promise<Run> {
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
  let cpu0 = process.cpuUsage();
  // Timed from the first message handled: connecting and subscribing are not the throughput.
  const handler = async () => {
    if (handled === 0) {
      t0 = performance.now();
      cpu0 = process.cpuUsage();
    }
    handled += 1;
  };
  const result = (): Run => {
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    return { rate: perSecond(count, ms), cpuUs: (cpu.user + cpu.system) / count };
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
    const run = result();
    await messages.close();
    await jsm.streams.delete(stream);
    await nc.close();
    return run;
  }
  const { createNatsConsumer, createNatsRetryWorker } = builds[side]!.nats;
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
  const run = result();
  await consumer.close({ timeoutMs: 5000 });
  await worker.close({ timeoutMs: 5000 });
  await jsm.streams.delete(stream);
  await nc.close();
  return run;
}

interface Row {
  name: string;
  baseline: string;
  requeue: Run[];
  plain: Run[];
  ratios: number[];
  before: Run[];
  beforeRatios: number[];
}
const rows: Row[] = [
  {
    name: 'RabbitMQ, healthy',
    baseline:
      'amqplib consume, prefetch = concurrency, manual ack per message, default socket options',
    requeue: [],
    plain: [],
    ratios: [],
    before: [],
    beforeRatios: [],
  },
  {
    name: 'JetStream, healthy',
    baseline: 'JetStream pull consumer.consume() with max_messages = concurrency, ack per message',
    requeue: [],
    plain: [],
    ratios: [],
    before: [],
    beforeRatios: [],
  },
];
// Warm-up, untimed: every side once, so no side's first round pays its JIT compilation.
for (const side of Object.keys(builds).concat('plain') as Side[]) {
  await amqpRun(side);
  await natsRun(side);
}
for (let r = 0; r < repeats; r++) {
  for (const [row, runOf] of [
    [rows[0]!, amqpRun],
    [rows[1]!, natsRun],
  ] as const) {
    const sides: Side[] = builds.before ? ['requeue', 'plain', 'before'] : ['requeue', 'plain'];
    const order = r % 2 === 0 ? sides : sides.toReversed();
    const got: Partial<Record<Side, Run>> = {};
    for (const side of order) got[side] = await runOf(side);
    const [req, plain, before] = [got.requeue!, got.plain!, got.before];
    row.requeue.push(req);
    row.plain.push(plain);
    row.ratios.push(req.rate / plain.rate);
    if (before) {
      row.before.push(before);
      row.beforeRatios.push(before.rate / plain.rate);
    }
    const show = (name: string, x: Run | undefined) =>
      x ? `, ${name} ${formatRate(x.rate)}/s ${x.cpuUs.toFixed(1)} µs CPU/msg` : '';
    console.log(
      `${row.name} #${r + 1}${show('requeue', req)}${show('plain', plain)}${show('before', before)}`,
    );
  }
}
redis.disconnect();
await redisServer.stop();

const rate = (runs: Run[]) => median(runs.map((x) => x.rate));
const cpu = (runs: Run[]) => median(runs.map((x) => x.cpuUs)).toFixed(1);
const table = rows
  .map((row) => {
    const ratio = median(row.ratios);
    const before = builds.before
      ? ` ${formatRatio(median(row.beforeRatios))} (${cpu(row.before)} µs) |`
      : '';
    return `| ${row.name} | ${formatRate(rate(row.requeue))} | ${formatRate(rate(row.plain))} | ${formatRatio(ratio)} | ${formatRatio(Math.min(...row.ratios))}–${formatRatio(Math.max(...row.ratios))} | ${cpu(row.requeue)} | ${cpu(row.plain)} |${before} ≥ 0.90 | ${ratio >= 0.9 ? 'yes' : 'no'} |`;
  })
  .join('\n');
const body = `## Broker consumers: requeue/amqp and requeue/nats vs plain clients, healthy

Written by \`bench/consumers.bench.ts\` on ${new Date().toISOString()} (the run took ${Math.round((Date.now() - startedAt) / 1000)} s).

- Command: \`npm run bench:consumers → node --import tsx bench/consumers.bench.ts --messages ${count} --repeats ${repeats} --concurrency ${concurrency}${values.before !== undefined ? ' --before <tsc build of the commit before>' : ''}\`; requeue at ${describeRevision(['src', 'workers'])}, loaded from its tsc build (\`dist/\`)${values.before !== undefined ? `; "before" is ${beforeNote}, run in the same rounds as a third side` : ''}
- Machine: \`${machine.uname}\`; ${machine.cpuModel}, ${machine.cores} cores; 1-minute load average ${loadAtStart.toFixed(2)} at the start, ${(loadavg()[0] ?? 0).toFixed(2)} at the end
- Node ${machine.node}; RabbitMQ and NATS (JetStream) of the machine on loopback; requeue's retry queue on a private redis-server ${machine.redis}
- ${count} messages per run, pre-loaded; handlers return at once (the plain ones after parsing the JSON body, which requeue's hand their handler parsed); prefetch / pull size ${concurrency} on both sides; requeue's side runs its retry worker too (idle: nothing fails); median of ${repeats} runs per side after an untimed warm-up run of every side, the side that goes first alternating; a run is timed from its first message handled to its last (connecting and subscribing left out). CPU µs/msg is the bench process's user + system time over the run divided by the messages: what each message costs the consumer's process, which the machine's other load moves much less than messages/s.

| scenario | requeue msgs/s | plain msgs/s | ratio | ratio range | requeue CPU µs/msg | plain CPU µs/msg |${builds.before ? ' before: ratio (CPU µs/msg) |' : ''} target | met? |
| --- | --- | --- | --- | --- | --- | --- |${builds.before ? ' --- |' : ''} --- | --- |
${table}

Baselines: ${rows.map((r) => `${r.name}: ${r.baseline}`).join('; ')}. The failure comparison is the section below (\`--scenario transient\`).`;
console.log(body);
if (!values['dry-run']) await writeResultsSection('bench/RESULTS.md', 'consumers-bench', body);
process.exit(0);

/** The transient scenario's section of bench/RESULTS.md. */
function transientBody(input: {
  table: string;
  delayMs: number;
  machine: Awaited<ReturnType<typeof describeMachine>>;
}): string {
  const { table, delayMs, machine: m } = input;
  return `## Broker consumers: 1 transient failure per message, requeue vs RabbitMQ's TTL + DLX ladder and JetStream's BackOff

Written by \`bench/consumers.bench.ts --scenario transient\` on ${new Date().toISOString()} (the run took ${Math.round((Date.now() - startedAt) / 1000)} s).

- Command: \`npm run bench:consumers -- --scenario transient --messages ${count} --repeats ${repeats} --concurrency ${concurrency} --delay-ms ${delayMs}\`; requeue at ${describeRevision(['src', 'workers'])}, loaded from its tsc build (\`dist/\`)
- Machine: \`${m.uname}\`; ${m.cpuModel}, ${m.cores} cores; 1-minute load average ${loadAtStart.toFixed(2)} at the start, ${(loadavg()[0] ?? 0).toFixed(2)} at the end
- Node ${m.node}; RabbitMQ and NATS (JetStream) of the machine on loopback; requeue's retry queue on a private redis-server ${m.redis}
- ${count} messages per run, pre-loaded; every message's first run throws, its second succeeds; prefetch / pull size ${concurrency} everywhere (requeue's retry worker: concurrency ${concurrency}); intended retry delay ${delayMs} ms, no jitter (requeue: \`strategy: 'fixed'\`, \`jitter: 0\`); median messages/s of ${repeats} runs per side (the order of the sides reversed every other round) after an untimed warm-up of each; lateness over every retry of every run.
- msgs/s counts all ${count} messages delivered (second run succeeded), from the first message handled to the last success: with a ${delayMs} ms delay no side can beat about ${count} / (first pass + ${delayMs / 1000} s).
- Lateness: when a message's second run started, less (its first run's failure + ${delayMs} ms). Negative is early.

| broker | retry by | msgs/s to all delivered | lateness min | p50 | p99 | max |
| --- | --- | --- | --- | --- | --- | --- |
${table}
`;
}
