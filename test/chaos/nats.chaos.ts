/**
 * JetStream consumer recovery (issue 26): CHAOS_NATS_MESSAGES messages
 * (5,000) on a stream of a private nats-server (-js, a temp store dir, a port
 * of its own: the machine's NATS is shared), 20 % failing 1–3 times and 2 %
 * for good, through 2 consumer processes (`requeue/nats` consumer + retry
 * worker, one in `hand-off` mode and one in `nak` mode, concurrency 8 each)
 * SIGKILLed at random at least CHAOS_NATS_KILLS times (10) and started again,
 * and the nats-server itself restarted once mid-run. Then: 0 lost — every
 * message succeeded or is in the DLQ, never both; every permanent one dead;
 * the handler's re-runs counted; nothing pending or unacknowledged on the
 * durable consumer, the retry queue drained.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { RedisServerHandle } from '../../src/redis/redis-server.js';
import { createQueue } from '../../src/scheduler/queue.js';
import { defaultNatsRetryQueue } from '../../workers/nats/index.js';
import { consumerCounts, makeStream, natsTestConnection } from '../harness/nats.js';
import { chaosMessages, ConsumerProcesses, outcomes } from './broker-harness.js';
import { chaosRedis, chaosSeed, envInt, planRandom, report, sleep } from './harness.js';

const count = envInt('CHAOS_NATS_MESSAGES', 5_000);
const minKills = envInt('CHAOS_NATS_KILLS', 10);
const seed = chaosSeed();
const stream = 'chaos_nats';
const durable = 'work';
const retryQueue = defaultNatsRetryQueue(stream, durable);
const prefix = `chaos-nats-${process.pid}`;

let server: RedisServerHandle;
let redis: Redis;
let nats: ChildProcess | undefined;
let port = 0;
const storeDir = mkdtempSync(join(tmpdir(), 'requeue-chaos-nats-'));

async function freePort(): Promise<number> {
  const s = createServer();
  s.listen(0, '127.0.0.1');
  await once(s, 'listening');
  const p = (s.address() as { port: number }).port;
  s.close();
  return p;
}

/** Starts the private nats-server on `port` with JetStream in `storeDir`; resolves once it listens. */
async function startNats(): Promise<void> {
  nats = spawn('nats-server', ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', storeDir], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  await new Promise<void>((resolve, reject) => {
    let log = '';
    nats!.stderr!.on('data', (c: Buffer) => {
      log += c.toString();
      if (log.includes('Server is ready')) resolve();
    });
    nats!.once('exit', (code) => reject(new Error(`nats-server exited (${code}): ${log}`)));
  });
}

async function stopNats(): Promise<void> {
  if (!nats || nats.exitCode !== null) return;
  const exited = once(nats, 'exit');
  nats.kill('SIGTERM');
  await exited;
}

beforeAll(async () => {
  server = await chaosRedis(12);
  redis = new Redis(server.url, { maxRetriesPerRequest: null });
  port = envInt('CHAOS_NATS_PORT', 0) || (await freePort());
  await startNats();
});
afterAll(async () => {
  await stopNats();
  rmSync(storeDir, { recursive: true, force: true });
  redis?.disconnect();
  await server?.stop();
});

it(`${count} messages on JetStream: 0 lost through ${minKills}+ consumer SIGKILLs and a nats-server restart`, async () => {
  const url = `nats://127.0.0.1:${port}`;
  let nc = await natsTestConnection(url);
  await makeStream(nc, stream, durable, { ackWaitMs: 2_000 });
  const messages = chaosMessages(count, planRandom(seed));
  const env = {
    BROKER: 'nats',
    REDIS_URL: server.url,
    PREFIX: prefix,
    SOURCE: stream,
    DURABLE: durable,
    BROKER_URL: url,
  };
  const handOff = new ConsumerProcesses({ ...env, NATS_MODE: 'hand-off' });
  const nak = new ConsumerProcesses({ ...env, NATS_MODE: 'nak' });
  const retries = createQueue(retryQueue, { connection: redis });
  const startedAt = Date.now();
  let kills = 0;
  let restarts = 0;
  let settled: Awaited<ReturnType<typeof outcomes>>;
  try {
    await Promise.all([handOff.start(0), nak.start(0)]);
    const killRandom = planRandom(seed + 1);
    let publishing = true;
    // A consumer (re)starts only while the server is up and a restart waits for
    // a start in progress: a consumer's first connection failing is a clear exit
    // by design (a process manager starts it again), not what this run is after.
    let serverTurn: Promise<void> = Promise.resolve();
    const killer = (async () => {
      while (publishing || kills < minKills) {
        await sleep(400 + Math.floor(killRandom() * 1_200));
        const crash = serverTurn.then(() => (kills % 2 === 0 ? handOff : nak).crash(0));
        serverTurn = crash;
        await crash;
        kills += 1;
      }
    })();
    for (let i = 0; i < messages.length; i += 100) {
      if (i === Math.floor(messages.length / 200) * 100) {
        // Half published: the server restarts (its store kept); everyone reconnects.
        const restart = serverTurn.then(async () => {
          await nc.close();
          await stopNats();
          await startNats();
          restarts += 1;
          nc = await natsTestConnection(url);
          // JetStream has recovered the stream once its consumer answers.
          for (let tries = 0; ; tries += 1) {
            const answered = await consumerCounts(nc, stream, durable).then(
              () => true,
              (err: unknown) => (tries < 40 ? false : Promise.reject(err)),
            );
            if (answered) break;
            await sleep(250);
          }
        });
        serverTurn = restart;
        await restart;
      }
      const js = nc.jetstream();
      await Promise.all(
        messages
          .slice(i, i + 100)
          .map((m) =>
            js.publish(`${stream}.in`, Buffer.from(JSON.stringify(m)), { msgID: `m${m.n}` }),
          ),
      );
      await sleep(250);
    }
    publishing = false;
    await killer;
    const deadline = Date.now() + 60_000;
    settled = await outcomes(redis, prefix, retryQueue);
    while (Date.now() < deadline) {
      settled = await outcomes(redis, prefix, retryQueue);
      const c = await retries.bull.getJobCounts('wait', 'delayed', 'active', 'prioritized');
      const open = Object.values(c).reduce((a, b) => a + b, 0);
      const js = await consumerCounts(nc, stream, durable);
      if (settled.ok.size + settled.dead.size >= count && open === 0 && js.ackPending === 0) break;
      await sleep(250);
    }
  } finally {
    await Promise.all([handOff.stop(), nak.stop()]);
  }
  const seconds = (Date.now() - startedAt) / 1000;
  const { ok, dead, runs } = settled;
  const both = [...dead.keys()].filter((n) => ok.has(n));
  const lost = messages.filter((m) => !ok.has(m.n) && !dead.has(m.n)).length;
  const duplicated = [...ok.values()].filter((c) => c > 1).length;
  const left = await consumerCounts(nc, stream, durable);
  const failedSet = await retries.bull.getFailedCount();
  const planned = messages.reduce((a, m) => a + (m.permanent ? 1 : m.fail + 1), 0);
  report({
    suite: 'nats',
    seed,
    enqueued: count,
    completed: ok.size,
    dead: dead.size,
    lost,
    duplicatedSideEffects: duplicated,
    kills,
    crashes: handOff.unexpectedExits + nak.unexpectedExits,
    jobsPerSec: Math.round(count / seconds),
    seconds: Math.round(seconds * 10) / 10,
    serverRestarts: restarts,
    handlerRuns: runs,
    plannedRuns: planned,
    reRuns: runs - planned,
    pendingLeft: left.pending,
    unackedLeft: left.ackPending,
  });
  await retries.close();
  await nc.close();
  expect(lost).toBe(0);
  expect(both).toEqual([]);
  for (const m of messages.filter((x) => x.permanent))
    expect(dead.get(m.n)).toBe('permanent-error');
  expect(left).toMatchObject({ pending: 0, ackPending: 0 });
  expect(failedSet).toBe(0);
  expect(kills).toBeGreaterThanOrEqual(minKills);
  expect(restarts).toBe(1);
  expect(handOff.unexpectedExits + nak.unexpectedExits).toBe(0);
  expect(duplicated).toBeLessThanOrEqual(kills * 8 + 16);
});
