/**
 * Fair dispatch across keys, measured from outside (issue 22, item 1): the
 * webhook worker (`node dist/workers/webhook/main.js`, a child process with
 * its defaults) with one endpoint holding a big backlog, then small
 * endpoints' events enqueued evenly over a window; the small events'
 * enqueue → delivery p50/p99, against the same run without the backlog,
 * with the dispatch key off (first in, first out: `dispatchKey: false`) and
 * on (the default, the endpoint), all four in one run on one private
 * redis-server, flushed between cases. Receivers on loopback answer after
 * `--latency-ms`.
 *
 * Also the healthy cost: one key's jobs through `createWorker` (a no-op
 * handler), keyed and unkeyed, alternated: add and process jobs/s.
 *
 * Run with `npm run bench:fairness` (`--help`); writes its section of
 * bench/RESULTS.md unless `--dry-run`.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { createQueue, createWorker } from 'requeue';
import { enqueueWebhook } from 'requeue/webhook';
import { createLogger } from '../src/config/logger.js';
import { createRedis } from '../src/redis/connection.js';
import { startRedisServer } from '../src/redis/redis-server.js';
import { describeMachine } from './support/machine.js';
import { writeResultsSection } from './support/results-file.js';
import { formatRate, formatRatio, perSecond } from './support/stats.js';

const { values: args } = parseArgs({
  options: {
    big: { type: 'string', default: '50000' },
    endpoints: { type: 'string', default: '10' },
    'per-endpoint': { type: 'string', default: '100' },
    'window-ms': { type: 'string', default: '10000' },
    'latency-ms': { type: 'string', default: '100' },
    'cost-jobs': { type: 'string', default: '5000' },
    'endpoint-concurrency': { type: 'string' },
    'cost-repeats': { type: 'string', default: '3' },
    repeats: { type: 'string', default: '3' },
    results: { type: 'string', default: 'bench/RESULTS.md' },
    'dry-run': { type: 'boolean', default: false },
    'skip-fifo': { type: 'boolean', default: false },
    'cost-only': { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});
if (args.help) {
  console.log(`Usage: npm run bench:fairness -- [--big 50000] [--endpoints 10] [--per-endpoint 100]
  [--window-ms 10000] [--latency-ms 100] [--repeats 3] [--cost-jobs 5000] [--cost-repeats 3]
  [--endpoint-concurrency n] [--skip-fifo] [--dry-run]
  [--cost-only]   only the healthy cost (keyed vs plain add and process), printed, never written`);
  process.exit(0);
}
const big = Number(args.big);
const endpoints = Number(args.endpoints);
const perEndpoint = Number(args['per-endpoint']);
const windowMs = Number(args['window-ms']);
const latencyMs = Number(args['latency-ms']);
const log = (line: string) => process.stderr.write(`${line}\n`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Response time per event id; the waiters are told of each. */
const delivered = new Map<string, number>();
let onDelivery: (id: string) => void = () => undefined;
const receiver = createServer((req, res) => {
  const id = String(req.headers['webhook-id']);
  req.resume();
  setTimeout(() => {
    res.end('ok');
    delivered.set(id, performance.now());
    onDelivery(id);
  }, latencyMs);
});
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

const waitFor = (done: () => boolean) =>
  new Promise<void>((resolve) => {
    if (done()) return resolve();
    onDelivery = () => {
      if (done()) resolve();
    };
  });

function p(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? Number.NaN;
}

interface CaseResult {
  repeat: number;
  keyed: boolean;
  backlog: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

async function runCase(
  redisUrl: string,
  keyed: boolean,
  backlog: number,
  repeat: number,
): Promise<CaseResult> {
  const name = `fair-${keyed ? 'on' : 'off'}-${backlog}`;
  const queue = createQueue(name, { connection: redisUrl });
  delivered.clear();
  const dispatch = keyed ? {} : { dispatchKey: false as const };
  const event = (endpoint: string, id: string) => ({
    endpoint: { id: endpoint, url: receiverUrl },
    event: { id, type: 'bench', payload: {} },
  });
  for (let i = 0; i < backlog; i += 200)
    await Promise.all(
      Array.from({ length: Math.min(200, backlog - i) }, (_, k) =>
        enqueueWebhook(queue, event('big', `big-${i + k}`), dispatch),
      ),
    );
  const child = spawn(process.execPath, ['dist/workers/webhook/main.js'], {
    env: {
      PATH: process.env.PATH,
      REDIS_URL: redisUrl,
      WEBHOOK_QUEUE: name,
      WEBHOOK_ALLOW_PRIVATE: 'true',
      WEBHOOK_SHUTDOWN_TIMEOUT_MS: '3000',
      LOG_LEVEL: 'warn',
      ...(args['endpoint-concurrency'] !== undefined && {
        WEBHOOK_ENDPOINT_CONCURRENCY: args['endpoint-concurrency'],
      }),
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  // Ready when it delivers: the backlog's first event, or a warm-up event.
  if (backlog === 0) await enqueueWebhook(queue, event('warm', 'warm'), dispatch);
  await waitFor(() => delivered.size > 0);
  if (backlog > 0) await sleep(2_000);
  const enqueued = new Map<string, number>();
  const total = endpoints * perEndpoint;
  const started = performance.now();
  for (let n = 0; n < total; n++) {
    const at = started + (n * windowMs) / total;
    const wait = at - performance.now();
    if (wait > 0) await sleep(wait);
    const id = `small-${n}`;
    enqueued.set(id, performance.now());
    void enqueueWebhook(queue, event(`small-${n % endpoints}`, id), dispatch);
  }
  await waitFor(() => [...enqueued.keys()].every((id) => delivered.has(id)));
  const latencies = [...enqueued].map(([id, at]) => delivered.get(id)! - at);
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  await exited;
  await queue.close();
  return {
    repeat,
    keyed,
    backlog,
    p50Ms: p(latencies, 0.5),
    p99Ms: p(latencies, 0.99),
    maxMs: Math.max(...latencies),
  };
}

/** One key's `jobs` jobs added then processed by `createWorker` (no-op handler), keyed or not. */
async function costRun(redisUrl: string, keyed: boolean, jobs: number, run: number) {
  const name = `cost-${keyed ? 'keyed' : 'plain'}-${run}`;
  const queue = createQueue(name, { connection: redisUrl });
  const addStart = performance.now();
  for (let i = 0; i < jobs; i += 50)
    await Promise.all(
      Array.from({ length: Math.min(50, jobs - i) }, (_, k) =>
        queue.add('job', { n: i + k }, keyed ? { dispatchKey: 'one' } : {}),
      ),
    );
  const addMs = performance.now() - addStart;
  let done = 0;
  let finish!: () => void;
  const finished = new Promise<void>((resolve) => (finish = resolve));
  const processStart = performance.now();
  const worker = createWorker(
    name,
    async () => {
      if (++done === jobs) finish();
    },
    { connection: redisUrl, concurrency: 16, logger: createLogger({ level: 'silent' }) },
  );
  await finished;
  const processMs = performance.now() - processStart;
  await worker.close();
  await queue.close();
  return { add: perSecond(jobs, addMs), process: perSecond(jobs, processMs) };
}

const server = await startRedisServer({ appendonly: false });
const admin = createRedis(server.url);
try {
  const machine = await describeMachine(admin);
  const results: CaseResult[] = [];
  const loads: number[] = [];
  // Each repeat: the baseline and the backlog next to each other, dispatch
  // key on; the FIFO pair once (its backlog case takes a minute or more).
  const repeats = args['cost-only'] ? 0 : Number(args.repeats);
  for (let repeat = 0; repeat < repeats; repeat++)
    for (const keyed of repeat === 0 && !args['skip-fifo'] ? [false, true] : [true])
      for (const backlog of [0, big]) {
        await admin.flushall();
        const load = loadavg()[0]!;
        loads.push(load);
        const r = await runCase(server.url, keyed, backlog, repeat);
        results.push(r);
        log(
          `#${repeat} dispatch key ${keyed ? 'on ' : 'off'} backlog ${backlog}: p50 ${r.p50Ms.toFixed(0)} ms, p99 ${r.p99Ms.toFixed(0)} ms, max ${r.maxMs.toFixed(0)} ms (load ${load.toFixed(2)})`,
        );
      }
  const costJobs = Number(args['cost-jobs']);
  type Rates = { add: number; process: number };
  const cost: { plain: Rates[]; keyed: Rates[] } = { plain: [], keyed: [] };
  for (let run = 0; run < Number(args['cost-repeats']); run++)
    for (const keyed of [false, true]) {
      await admin.flushall();
      const r = await costRun(server.url, keyed, costJobs, run);
      (keyed ? cost.keyed : cost.plain).push(r);
      log(
        `cost ${keyed ? 'keyed' : 'plain'} #${run}: add ${formatRate(r.add)}/s, process ${formatRate(r.process)}/s (load ${loadavg()[0]!.toFixed(2)})`,
      );
    }
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  /** p99 with the backlog ÷ without, per repeat. */
  const ratios = (keyed: boolean) =>
    Array.from({ length: repeats }, (_, repeat) => {
      const [none, backlog] = results.filter((r) => r.keyed === keyed && r.repeat === repeat);
      return none && backlog ? backlog.p99Ms / none.p99Ms : Number.NaN;
    }).filter(Number.isFinite);
  const onRatios = ratios(true);
  const row = (r: CaseResult, i: number) =>
    `| ${r.repeat + 1} | ${r.keyed ? 'on (endpoint)' : 'off (FIFO)'} | ${r.backlog.toLocaleString('en-US')} | ${r.p50Ms.toFixed(0)} | ${r.p99Ms.toFixed(0)} | ${r.maxMs.toFixed(0)} | ${loads[i]!.toFixed(1)} |`;
  const addPlain = med(cost.plain.map((c) => c.add));
  const addKeyed = med(cost.keyed.map((c) => c.add));
  const procPlain = med(cost.plain.map((c) => c.process));
  const procKeyed = med(cost.keyed.map((c) => c.process));
  // Each keyed run against the plain run next to it: steadier on a shared machine.
  const pairRatios = (what: keyof Rates) =>
    cost.keyed.map((k, i) => k[what] / cost.plain[i]![what]);
  const addRatios = pairRatios('add');
  const processRatios = pairRatios('process');
  const body = `## Fair dispatch across keys (issue 22, item 1)

\`npm run bench:fairness -- --big ${big}\` — ${machine.cpuModel}, ${machine.cores} cores, Node ${machine.node}, Redis ${machine.redis}, load ${machine.loadAverage.toFixed(2)} at start.
The webhook worker (\`node dist/workers/webhook/main.js\`, defaults: concurrency 16, a quarter per endpoint) on a private redis-server; endpoint \`big\` holds ${big.toLocaleString('en-US')} queued events (none in the baseline) when the worker starts; 2 s later ${endpoints} endpoints × ${perEndpoint} events are enqueued evenly over ${windowMs / 1000} s. Every receiver answers after ${latencyMs} ms. Latency: enqueue → the receiver's answer, small endpoints only.

| repeat | dispatch key | backlog | p50 ms | p99 ms | max ms | load (1 min) |
|---:|---|---:|---:|---:|---:|---:|
${results.map(row).join('\n')}

p99 with the backlog ÷ without, each pair run side by side: **${formatRatio(ratios(false)[0] ?? Number.NaN)}× with the dispatch key off → ${formatRatio(med(onRatios))}× on** (median of ${onRatios.length}: ${onRatios.map(formatRatio).join(', ')}; target ≤ 1.25×). 1-minute load average ${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)} during the cases.

Healthy cost, one key, ${costJobs.toLocaleString('en-US')} jobs, \`createWorker\` concurrency 16, no-op handler, medians of ${cost.plain.length} alternated runs (ratio: the median of each keyed run against the plain run next to it, range in brackets): add ${formatRate(addPlain)} → ${formatRate(addKeyed)} jobs/s keyed, **${formatRatio(med(addRatios))}×** (${formatRatio(Math.min(...addRatios))}–${formatRatio(Math.max(...addRatios))}; one script call each, BullMQ's add with the stamp, as a plain add is one); process ${formatRate(procPlain)} → ${formatRate(procKeyed)} jobs/s, **${formatRatio(med(processRatios))}×** (${formatRatio(Math.min(...processRatios))}–${formatRatio(Math.max(...processRatios))}). Unkeyed jobs take the same path as before.
`;
  log(args['cost-only'] ? body.slice(body.indexOf('Healthy cost')) : body);
  if (!args['cost-only'] && !args['dry-run'])
    await writeResultsSection(args.results, 'fairness', body);
} finally {
  admin.disconnect();
  await server.stop();
  receiver.close();
}
