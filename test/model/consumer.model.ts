/**
 * The consumer model (issue 26): random sequences of publishes with planned
 * outcomes (succeed, fail transiently 1–3 times, fail for good, fail until
 * "fixed" and replayed), consumer SIGKILLs, broker-side connection closes
 * (amqp) and DLQ replays, against a real RabbitMQ queue or JetStream stream
 * and real `requeue/amqp` / `requeue/nats` consumer processes. At quiescence:
 * every message succeeded once (its side effect recorded under its dedupe
 * id) or is in the DLQ with its reason, never both, none lost; the source
 * empty with nothing unacked; the retry queue drained, its failed set empty.
 *
 * Seeded and replayable with the scheduler model's runner:
 * `npm run test:model -- --seed S --consumer-runs N test/model/consumer.model.ts`
 * (`--path P` replays one failing case; printed with it).
 */
import fc from 'fast-check';
import { afterAll, beforeAll, it } from 'vitest';
import type { RedisServerHandle } from '../../src/redis/redis-server.js';
import {
  ConsumerSystem,
  createModelVhost,
  deleteModelVhost,
  type ConsumerRunConfig,
  type PlannedMessage,
} from './consumer-system.js';
import { startModelRedis } from './system.js';

const env = process.env;
const seed = env.MODEL_SEED !== undefined ? Number(env.MODEL_SEED) : Date.now() % 2 ** 31;
const numRuns = Number(env.MODEL_CONSUMER_RUNS ?? env.MODEL_RUNS ?? '4');
const path = env.MODEL_PATH || undefined;
const quiesceMs = Number(env.MODEL_QUIESCE_MS ?? '20000');
const timeLimitMs = Number(env.MODEL_CONSUMER_TIME_LIMIT_MS ?? '110000');

type Command =
  | { kind: 'publish'; messages: Omit<PlannedMessage, 'n'>[] }
  | { kind: 'crash'; index: number }
  | { kind: 'close' }
  | { kind: 'replay' }
  | { kind: 'wait'; ms: number };

const messageArb: fc.Arbitrary<Omit<PlannedMessage, 'n'>> = fc
  .record({
    outcome: fc.constantFrom('ok', 'ok', 'ok', 'transient', 'transient', 'permanent', 'heal'),
    fail: fc.integer({ min: 1, max: 3 }),
    withId: fc.boolean(),
  })
  .map(({ outcome, fail, withId }) => ({
    fail: outcome === 'transient' ? fail : 0,
    permanent: outcome === 'permanent' || outcome === 'heal',
    heal: outcome === 'heal',
    withId,
  }));

const commandArb: fc.Arbitrary<Command> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('publish' as const),
      messages: fc.array(messageArb, { minLength: 1, maxLength: 15 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('crash' as const), index: fc.nat(1) }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'close' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'replay' as const }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('wait' as const),
      ms: fc.integer({ min: 20, max: 400 }),
    }),
  },
);

const configArb: fc.Arbitrary<ConsumerRunConfig> = fc.record({
  broker: fc.constantFrom('amqp' as const, 'nats' as const),
  processes: fc.integer({ min: 1, max: 2 }),
  concurrency: fc.integer({ min: 1, max: 4 }),
  queueType: fc.constantFrom('quorum' as const, 'classic' as const),
  natsMode: fc.constantFrom('hand-off' as const, 'nak' as const),
  handlerMs: fc.integer({ min: 5, max: 80 }),
});

/** Thrown by a run whose system disagrees with the model. */
class ModelViolation extends Error {
  override name = 'ModelViolation';
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Where the messages ended: successes and dedupe ids per message, DLQ records per message. */
async function observe(sys: ConsumerSystem) {
  const ok = new Map(
    Object.entries(await sys.redis.hgetall(`${sys.prefix}:ok`)).map(([n, c]) => [
      Number(n),
      Number(c),
    ]),
  );
  const ids = new Map<number, string[]>();
  for (const [id, n] of Object.entries(await sys.redis.hgetall(`${sys.prefix}:effects`)))
    ids.set(Number(n), [...(ids.get(Number(n)) ?? []), id]);
  const dead = new Map<number, string[]>();
  for (const record of await sys.dlq.list({}, { limit: 10_000 })) {
    const body = JSON.parse(
      Buffer.from((record.data as { body: string }).body, 'base64').toString(),
    ) as { n: number };
    dead.set(body.n, [...(dead.get(body.n) ?? []), record.reason]);
  }
  return { ok, ids, dead };
}

let server: RedisServerHandle;
beforeAll(async () => {
  server = await startModelRedis();
  createModelVhost();
});
afterAll(async () => {
  deleteModelVhost();
  await server?.stop();
});

it('every consumed message succeeds once or is dead with its reason, through crashes, closes and replays', async () => {
  let run = 0;
  const property = fc.asyncProperty(
    configArb,
    fc.array(commandArb, { minLength: 2, maxLength: 7 }),
    async (config, commands) => {
      run += 1;
      const startedAt = Date.now();
      const sys = new ConsumerSystem(server, config);
      const published: PlannedMessage[] = [];
      const healed = new Set<number>();
      let disrupted = 0;
      try {
        await sys.start();
        for (const command of commands) {
          if (command.kind === 'publish') {
            const batch = command.messages.map((m, i) => ({ ...m, n: published.length + i }));
            published.push(...batch);
            await sys.publish(batch);
          } else if (command.kind === 'crash') {
            await sys.crash(command.index);
            disrupted += 1;
          } else if (command.kind === 'close') {
            if (config.broker !== 'amqp') continue;
            sys.closeConnections();
            disrupted += 1;
          } else if (command.kind === 'replay') {
            // "Fixed": the dead heal-messages will succeed; then everything dead is replayed.
            const { dead } = await observe(sys);
            const fixed = published.filter((m) => m.heal && dead.has(m.n)).map((m) => m.n);
            for (const n of fixed) healed.add(n);
            if (fixed.length > 0)
              await sys.redis.sadd(`${sys.prefix}:healed`, ...fixed.map(String));
            const result = await sys.dlq.replay({});
            sys.journal.push(
              `healed ${fixed.join(',') || 'none'}; replayed ${JSON.stringify(result)}`,
            );
          } else {
            await sleep(command.ms);
          }
        }
        // Quiesce: every message succeeded or dead, the retry queue drained, and
        // the source empty — a message whose ack a closed connection lost is back
        // in the queue, seen as settled, until the reconnected consumer takes it
        // again (at least once) and acks it.
        const deadline = Date.now() + quiesceMs;
        let seen = await observe(sys);
        while (Date.now() < deadline) {
          seen = await observe(sys);
          const settled = published.every((m) => seen.ok.has(m.n) || seen.dead.has(m.n));
          if (settled && (await sys.openRetries()) === 0) {
            const source = await sys.sourceLeft();
            if (source.left === 0 && source.unacked === 0) break;
          }
          await sleep(100);
        }
        await sys.stopProcesses();
        seen = await observe(sys);
        const violations: string[] = [];
        for (const m of published) {
          const ok = seen.ok.get(m.n) ?? 0;
          const dead = seen.dead.get(m.n) ?? [];
          const ids = seen.ids.get(m.n) ?? [];
          const shouldDie = m.permanent && !healed.has(m.n);
          if (ok === 0 && dead.length === 0) violations.push(`message ${m.n} lost`);
          if (ok > 0 && dead.length > 0) violations.push(`message ${m.n} both succeeded and dead`);
          if (shouldDie && (dead.length !== 1 || dead[0] !== 'permanent-error'))
            violations.push(
              `message ${m.n} should be dead once as permanent-error: ${JSON.stringify(dead)}`,
            );
          if (!shouldDie && ok === 0)
            violations.push(`message ${m.n} never succeeded (dead: ${JSON.stringify(dead)})`);
          if (ok > 0 && ids.length !== 1)
            violations.push(`message ${m.n} has ${ids.length} dedupe ids: ${ids.join(', ')}`);
          if (ok > 1 && disrupted === 0)
            violations.push(`message ${m.n} succeeded ${ok} times with no crash or close`);
        }
        const left = await sys.sourceLeft();
        if (left.left !== 0 || left.unacked !== 0)
          violations.push(`source holds ${JSON.stringify(left)}`);
        const open = await sys.openRetries();
        if (open !== 0) violations.push(`retry queue has ${open} open jobs`);
        const failed = await sys.retries.bull.getFailedCount();
        if (failed !== 0) violations.push(`BullMQ failed set has ${failed}`);
        if (sys.unexpectedExits() !== 0)
          violations.push(`${sys.unexpectedExits()} consumer process(es) crashed`);
        const reRuns = [...seen.ok.values()].reduce((a, c) => a + c - 1, 0);
        console.log(
          `[consumer model] run ${run}: ${JSON.stringify(config)} ${commands.length} commands, ` +
            `${published.length} messages, ${disrupted} disruptions, ${reRuns} repeated successes, ` +
            `${violations.length} violations, ${Date.now() - startedAt} ms`,
        );
        if (violations.length > 0)
          throw new ModelViolation(
            `${violations.length} violation(s):\n  - ${violations.join('\n  - ')}\nwhat happened:\n    ${sys.journal.join('\n    ')}`,
          );
      } finally {
        await sys.stop();
      }
    },
  );
  console.log(`[consumer model] seed ${seed}, ${numRuns} runs`);
  const details = await fc.check(property, {
    seed,
    numRuns,
    ...(path ? { path } : {}),
    interruptAfterTimeLimit: timeLimitMs,
    markInterruptAsFailure: false,
  });
  if (details.interrupted && !details.failed)
    console.log(`[consumer model] stopped by the time limit after ${details.numRuns} runs`);
  if (details.failed) {
    const error = details.errorInstance;
    throw new Error(
      `${fc.defaultReportMessage(details)}\n\n${error instanceof Error ? error.message : String(error)}\n\n` +
        `Reproduce with:\n  npm run test:model -- --seed ${details.seed}` +
        `${details.counterexamplePath ? ` --path ${details.counterexamplePath}` : ''} test/model/consumer.model.ts\n`,
    );
  }
});
