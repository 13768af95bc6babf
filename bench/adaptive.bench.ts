/**
 * Adaptive concurrency per key (issue 22, item 4): what it costs a healthy
 * queue, and what it saves against an overloaded dependency. Both sides of
 * each figure run in the same process, alternated, on the same Redis.
 *
 *   npm run bench:adaptive            (REDIS_URL, else 127.0.0.1:6379)
 */
import { createServer, request, type Agent } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
// The built package, as users run it (`npm run build` first; the script does).
import { createLogger, createQueue, createWorker, LimitStore, type WorkerOptions } from 'requeue';
import { cleanQueue } from './support/clean-queue.js';
import { Countdown } from './support/countdown.js';

const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const logger = createLogger({ level: 'silent' });
const admin = new Redis(url);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');

type Data = { i: number; k: string };

/** Jobs/s of one worker over `jobs` pre-loaded jobs spread over `keys` keys, each taking `workMs`. */
async function healthy(
  adaptive: boolean,
  jobs: number,
  keys: number,
  workMs: number,
): Promise<number> {
  const name = `bench-adaptive-healthy-${process.pid}-${performance.now().toFixed(0)}`;
  const connection = new Redis(url, { maxRetriesPerRequest: null });
  const queue = createQueue<Data>(name, { connection });
  for (let s = 0; s < jobs; s += 1_000)
    await queue.addBulk(
      Array.from({ length: 1_000 }, (_, j) => ({
        name: 'b',
        data: { i: s + j, k: `key-${(s + j) % keys}` },
      })),
    );
  const work = workMs > 0 ? () => new Promise((r) => setTimeout(r, workMs)) : async () => undefined;
  const worker = createWorker<Data>(name, work, {
    connection,
    concurrency: 16,
    keyConcurrency: 16,
    breakerKey: (job) => job.data.k,
    autorun: false,
    logger,
    ...(adaptive ? { adaptiveConcurrency: { initial: 16 } } : {}),
  });
  const done = new Countdown(jobs, 120_000, async () => JSON.stringify(await queue.counts()));
  worker.on('job:completed', done.tick);
  await worker.waitUntilReady();
  const startedAt = performance.now();
  const running = worker.run();
  const finishedAt = await done.finished;
  await worker.close();
  await running;
  await queue.close();
  connection.disconnect();
  await cleanQueue(admin, name);
  return (jobs / (finishedAt - startedAt)) * 1000;
}

/**
 * A dependency that does `capacity` requests' worth of work at once: a
 * request takes `baseMs` × max(1, in flight at its arrival / capacity), so
 * past its capacity every request slows down, and past the client's timeout
 * all its work is wasted (congestion collapse).
 */
async function overloadedServer(capacity: number, baseMs: number) {
  const stats = { ok: 0, peak: 0 };
  let inFlight = 0;
  const server = createServer((req, res) => {
    inFlight += 1;
    stats.peak = Math.max(stats.peak, inFlight);
    req.resume();
    setTimeout(
      () => {
        inFlight -= 1;
        if (!res.destroyed) {
          stats.ok += 1;
          res.writeHead(200).end();
        }
      },
      baseMs * Math.max(1, inFlight / capacity),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return { port, stats, close: () => server.close() };
}

function get(port: number, signal: AbortSignal, agent: Agent | false): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/', agent, signal }, (res) => {
      res.resume();
      res.on('end', () =>
        res.statusCode === 200
          ? resolve()
          : reject(Object.assign(new Error(`HTTP ${res.statusCode}`), { status: res.statusCode })),
      );
    });
    req.on('error', reject);
    req.end();
  });
}

interface OverloadRun {
  label: string;
  adaptive: WorkerOptions['adaptiveConcurrency'];
}

const slots = Number(process.env.BENCH_SLOTS ?? 16);

/** Two workers (`slots` each) on one key against the server, for `seconds`: goodput. */
async function overload(run: OverloadRun, seconds: number, capacity: number, baseMs: number) {
  const name = `bench-adaptive-overload-${process.pid}-${performance.now().toFixed(0)}`;
  const server = await overloadedServer(capacity, baseMs);
  const connection = new Redis(url, { maxRetriesPerRequest: null });
  const queue = createQueue<Data>(name, { connection });
  const jobs = Math.ceil((capacity / baseMs) * 1000 * seconds * 1.5);
  for (let s = 0; s < jobs; s += 1_000)
    await queue.addBulk(
      Array.from({ length: 1_000 }, (_, j) => ({ name: 'b', data: { i: s + j, k: 'dep' } })),
    );
  let completed = 0;
  let timeouts = 0;
  const workers = [0, 1].map(() => {
    const w = createWorker<Data>(name, (job) => get(server.port, job.signal, false), {
      connection: new Redis(url, { maxRetriesPerRequest: null }),
      concurrency: slots,
      keyConcurrency: slots,
      breakerKey: () => 'dep',
      attemptTimeoutMs: 100,
      policy: { strategy: 'fixed', baseMs: 50, maxAttempts: 1_000 },
      autorun: false,
      logger,
      adaptiveConcurrency: run.adaptive,
    });
    w.on('job:completed', () => (completed += 1));
    w.on('retry:scheduled', () => (timeouts += 1));
    return w;
  });
  await Promise.all(workers.map((w) => w.waitUntilReady()));
  const running = workers.map((w) => w.run());
  // The first 2 s find the level; goodput is counted over the rest.
  await new Promise((r) => setTimeout(r, 2_000));
  const [c0, t0, s0] = [completed, timeouts, server.stats.ok];
  const store = new LimitStore(admin, name);
  const trace: string[] = [];
  const tracer = setInterval(() => {
    void store.list(1).then(([v]) => {
      trace.push(`${v?.limit?.toFixed(1) ?? 'init'}/${v?.inFlight ?? 0}`);
    });
  }, 1_000);
  await new Promise((r) => setTimeout(r, (seconds - 2) * 1000));
  clearInterval(tracer);
  if (process.env.BENCH_TRACE) console.log(`  limit/in flight each second: ${trace.join(' ')}`);
  const measured = {
    completed: completed - c0,
    timeouts: timeouts - t0,
    served: server.stats.ok - s0,
  };
  await Promise.all(workers.map((w) => w.close({ timeoutMs: 3_000 })));
  await Promise.allSettled(running);
  server.close();
  await queue.close();
  connection.disconnect();
  await cleanQueue(admin, name);
  const span = seconds - 2;
  return {
    label: run.label,
    goodput: measured.completed / span,
    failedAttemptsPerS: measured.timeouts / span,
    servedPerS: measured.served / span,
    peak: server.stats.peak,
  };
}

async function main(): Promise<void> {
  const jobs = Number(process.env.BENCH_JOBS ?? 5_000);
  const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
  console.log(`# adaptive concurrency bench — load ${load()} at start`);
  for (const workMs of process.env.BENCH_ONLY === 'overload' ? [] : [0, 5]) {
    const off: number[] = [];
    const on: number[] = [];
    for (let r = 0; r < rounds; r += 1) {
      off.push(await healthy(false, jobs, 10, workMs));
      on.push(await healthy(true, jobs, 10, workMs));
    }
    console.log(
      `healthy: ${jobs} ${workMs ? `${workMs} ms` : 'no-op'} jobs over 10 keys, concurrency 16, ${rounds} rounds alternated: ` +
        `off ${median(off).toFixed(0)} jobs/s [${off.map((x) => x.toFixed(0)).join(', ')}], ` +
        `on ${median(on).toFixed(0)} jobs/s [${on.map((x) => x.toFixed(0)).join(', ')}], ` +
        `ratio on/off ${(median(on) / median(off)).toFixed(3)} (load ${load()})`,
    );
  }
  const capacity = Number(process.env.BENCH_CAPACITY ?? 4);
  const baseMs = 20;
  const seconds = Number(process.env.BENCH_SECONDS ?? 12);
  console.log(
    `overload: a server that does ${capacity} requests at once in ${baseMs} ms (best ${(capacity / baseMs) * 1000}/s), ` +
      `each slower as more arrive; 2 workers × ${slots} slots, attempt timeout 100 ms; ${seconds - 2} s measured`,
  );
  const runs: OverloadRun[] = [
    { label: 'without adaptive limit', adaptive: false },
    { label: 'adaptive, defaults (timeouts only)', adaptive: {} },
    { label: 'adaptive, latencyTargetMs 60', adaptive: { latencyTargetMs: 60 } },
  ];
  for (const run of runs) {
    const r = await overload(run, seconds, capacity, baseMs);
    console.log(
      `  ${r.label}: goodput ${r.goodput.toFixed(0)} jobs/s (${((r.goodput / ((capacity / baseMs) * 1000)) * 100).toFixed(0)} % of best), ` +
        `failed attempts ${r.failedAttemptsPerS.toFixed(0)}/s, server answered ${r.servedPerS.toFixed(0)}/s, ` +
        `peak in flight ${r.peak} (load ${load()})`,
    );
  }
  admin.disconnect();
}

await main();
