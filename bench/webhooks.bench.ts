/**
 * Webhook isolation, measured from outside (issue 13, item 7): healthy
 * endpoints' delivery latency (enqueue → the receiver gets the request),
 * p50/p99, with nothing wrong and with one endpoint that refuses
 * connections, answers 503, answers 429 with `Retry-After`, or hangs, and
 * with a population of flaky receivers (each event fails 1–3 times first,
 * 503 or 429 with `Retry-After: 1`): how long until all are delivered, and
 * how many twice. For the standalone worker (`node dist/workers/webhook/main.js`)
 * and the service (`node dist/workers/service/main.js`, webhooks enqueued
 * through `POST /v1/webhooks`), each a real child process with its default
 * settings (only Redis and "private destinations allowed" are set), a fresh
 * one per case, against one private redis-server flushed between cases, the
 * receivers on loopback in this process.
 *
 * Run with `npm run bench:webhooks` (`--help` for the options); writes its
 * section of bench/RESULTS.md and, with `--json`, the JSON on stdout.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { mkdtemp, readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
// The built package, as users run it (`npm run build` first; the bench script does).
import { createQueue, type QueueCounts } from 'requeue';
import { enqueueWebhook, webhookBreakerDefaults, webhookWorkerDefaults } from 'requeue/webhook';
import { printTable } from '../src/cli/table.js';
import { createRedis } from '../src/redis/connection.js';
import { freePort, startRedisServer } from '../src/redis/redis-server.js';
import { describeMachine, type Machine } from './support/machine.js';
import { writeResultsSection } from './support/results-file.js';
import { renderFanout, runFanout } from './webhook-fanout.js';
import { renderOutage, runOutage, type OutageOptions } from './webhook-outage.js';
import { describeRevision } from './support/revision.js';

const usage = `Usage: node --import tsx bench/webhooks.bench.ts [options]

  --modes <list>          worker,service (default both)
  --cases <list>          baseline,refused,503,429,hanging,flaky (default all)
  --endpoints <n>         healthy endpoints (default 10)
  --per-endpoint <n>      deliveries to each healthy endpoint per case (default 30)
  --window-ms <ms>        the healthy deliveries are enqueued evenly over this (default 10000)
  --flaky <n>             flaky deliveries in the flaky case (default 1000)
  --flaky-endpoints <n>   flaky receivers (endpoints) they go to (default 100)
  --retry-after <s>       the 429 endpoint's Retry-After (default 5)
  --results <path>        results file to write the section into (default bench/RESULTS.md)
  --dry-run               do not write the results file
  --json                  the report as JSON on stdout (the tables go to stderr)
  --render <json>         rewrite the results section from a saved --json report (no run)
  --fanout <n>            also fan one message out to n registered endpoints, the delivery
                          log off and on: time to the last delivery, the log's cost per
                          delivery (default 1000; 0 skips it)
  --only-fanout           run only the fan-out
  --endpoint-outage       also run the endpoint outage: --outage-endpoints (default 10000)
                          registered endpoints × --outage-messages (10) messages, one every
                          --outage-interval-ms (10000), --down-share (0.05) of the endpoints
                          answering 503 for --outage-ms (600000); stops at the latest
                          --outage-after-ms (300000) after the outage ends
  --only-endpoint-outage  run only the endpoint outage
`;

const caseIds = ['baseline', 'refused', '503', '429', 'hanging', 'flaky'] as const;
type CaseId = (typeof caseIds)[number];
const modeIds = ['worker', 'service'] as const;
type ModeId = (typeof modeIds)[number];

const caseLabels: Record<CaseId, string> = {
  baseline: 'baseline (nothing wrong)',
  refused: 'one endpoint refuses connections',
  '503': 'one endpoint answers 503',
  '429': 'one endpoint answers 429 + Retry-After',
  hanging: 'one endpoint never answers',
  flaky: 'flaky receivers (fail 1–3× first)',
};
const modeLabels: Record<ModeId, string> = {
  worker: 'standalone worker',
  service: 'service',
};

/** The healthy p99 may exceed its baseline by this much. */
const p99SlackMs = 2_000;
/** The flaky receivers must all be delivered within this (issue 13's "done when": 1,000 in 60 s). */
const flakyGoalMs = 60_000;
/** The old service's figure, issue 13: 265 of 2,800 flaky deliveries in 240 s. */
const oldServiceRate = 265 / 240;

interface Options {
  modes: ModeId[];
  cases: CaseId[];
  endpoints: number;
  perEndpoint: number;
  windowMs: number;
  flaky: number;
  flakyEndpoints: number;
  retryAfterS: number;
  resultsPath: string | undefined;
  json: boolean;
  fanout: number;
  onlyFanout: boolean;
  outage: OutageOptions | undefined;
  onlyOutage: boolean;
}

function parseOptions(argv: string[]): Options | 'help' | { render: string; resultsPath: string } {
  const { values } = parseArgs({
    args: argv,
    options: {
      modes: { type: 'string', default: modeIds.join(',') },
      cases: { type: 'string', default: caseIds.join(',') },
      endpoints: { type: 'string', default: '10' },
      'per-endpoint': { type: 'string', default: '30' },
      'window-ms': { type: 'string', default: '10000' },
      flaky: { type: 'string', default: '1000' },
      'flaky-endpoints': { type: 'string', default: '100' },
      'retry-after': { type: 'string', default: '5' },
      results: { type: 'string', default: 'bench/RESULTS.md' },
      'dry-run': { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
      render: { type: 'string' },
      fanout: { type: 'string', default: '1000' },
      'only-fanout': { type: 'boolean', default: false },
      'endpoint-outage': { type: 'boolean', default: false },
      'only-endpoint-outage': { type: 'boolean', default: false },
      'outage-endpoints': { type: 'string', default: '10000' },
      'outage-messages': { type: 'string', default: '10' },
      'outage-interval-ms': { type: 'string', default: '10000' },
      'down-share': { type: 'string', default: '0.05' },
      'outage-ms': { type: 'string', default: '600000' },
      'outage-after-ms': { type: 'string', default: '300000' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) return 'help';
  if (values.render !== undefined) return { render: values.render, resultsPath: values.results };
  const list = <T extends string>(raw: string, allowed: readonly T[], flag: string): T[] => {
    const items = raw.split(',').map((s) => s.trim());
    for (const item of items)
      if (!allowed.includes(item as T))
        throw new Error(`--${flag}: "${item}" is not one of ${allowed.join(', ')}`);
    return items as T[];
  };
  const whole = (raw: string, flag: string, min = 1): number => {
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min)
      throw new Error(`--${flag}: must be a whole number ≥ ${min}`);
    return n;
  };
  const share = (raw: string): number => {
    const n = Number(raw);
    if (!(n >= 0 && n <= 1)) throw new Error('--down-share: must be a number from 0 to 1');
    return n;
  };
  const cases = list(values.cases, caseIds, 'cases');
  return {
    modes: list(values.modes, modeIds, 'modes'),
    // The baseline first: every other case is compared with it.
    cases: cases.includes('baseline')
      ? ['baseline', ...cases.filter((c) => c !== 'baseline')]
      : cases,
    endpoints: whole(values.endpoints, 'endpoints'),
    perEndpoint: whole(values['per-endpoint'], 'per-endpoint'),
    windowMs: whole(values['window-ms'], 'window-ms', 100),
    flaky: whole(values.flaky, 'flaky'),
    flakyEndpoints: whole(values['flaky-endpoints'], 'flaky-endpoints'),
    retryAfterS: whole(values['retry-after'], 'retry-after'),
    resultsPath: values['dry-run'] ? undefined : values.results,
    json: values.json,
    fanout: whole(values.fanout, 'fanout', 0),
    onlyFanout: values['only-fanout'],
    outage:
      values['endpoint-outage'] || values['only-endpoint-outage']
        ? {
            endpoints: whole(values['outage-endpoints'], 'outage-endpoints'),
            messages: whole(values['outage-messages'], 'outage-messages'),
            intervalMs: whole(values['outage-interval-ms'], 'outage-interval-ms', 0),
            downShare: share(values['down-share']),
            outageMs: whole(values['outage-ms'], 'outage-ms', 0),
            afterMs: whole(values['outage-after-ms'], 'outage-after-ms', 0),
            latencyMs: 5,
          }
        : undefined,
    onlyOutage: values['only-endpoint-outage'],
  };
}

// ---------------------------------------------------------------------------
// Receivers

/** What a receiver answers to the `nth` request for an event: a status, or nothing ever. */
type Answer = { status: number; headers?: Record<string, string> } | 'hang';

interface Receiver {
  /** `http://127.0.0.1:<port>`; endpoints add a path. */
  base: string;
  /** When each event's first request arrived (performance.now()). */
  firstArrival: Map<string, number>;
  /** When each event was first answered 2xx. */
  firstSuccess: Map<string, number>;
  /** Requests per event. */
  requests: Map<string, number>;
  /** 2xx answers per event: more than one is a duplicate delivery. */
  delivered: Map<string, number>;
  /** Requests at once, most seen. */
  maxInFlight: number;
  close(): Promise<void>;
}

async function startReceiver(answer: (nth: number, eventId: string) => Answer): Promise<Receiver> {
  const r: Receiver = {
    base: '',
    firstArrival: new Map(),
    firstSuccess: new Map(),
    requests: new Map(),
    delivered: new Map(),
    maxInFlight: 0,
    close: async () => undefined,
  };
  let inFlight = 0;
  const server = createServer((req, res) => {
    const now = performance.now();
    const eventId = String(req.headers['webhook-id']);
    const nth = (r.requests.get(eventId) ?? 0) + 1;
    r.requests.set(eventId, nth);
    if (!r.firstArrival.has(eventId)) r.firstArrival.set(eventId, now);
    inFlight += 1;
    r.maxInFlight = Math.max(r.maxInFlight, inFlight);
    res.once('close', () => (inFlight -= 1));
    req.resume();
    req.once('end', () => {
      const a = answer(nth, eventId);
      if (a === 'hang') return;
      if (a.status >= 200 && a.status < 300) {
        r.delivered.set(eventId, (r.delivered.get(eventId) ?? 0) + 1);
        if (!r.firstSuccess.has(eventId)) r.firstSuccess.set(eventId, performance.now());
      }
      res.writeHead(a.status, a.headers).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  r.base = `http://127.0.0.1:${port}`;
  r.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return r;
}

/** Event `f-<i>`: 40 % succeed at once, the rest fail (i mod 3) + 1 times first, alternately 429 (Retry-After: 1) and 503. */
function flakyAnswer(nth: number, eventId: string): Answer {
  const i = Number(eventId.slice(2));
  const failures = i % 5 < 2 ? 0 : 1 + (i % 3);
  if (nth > failures) return { status: 200 };
  return i % 2 === 0 ? { status: 429, headers: { 'retry-after': '1' } } : { status: 503 };
}

// ---------------------------------------------------------------------------
// The process under test

interface Child {
  proc: ChildProcess;
  /** The service's intake URL (the service only). */
  url: string | undefined;
  logFile: string;
  /** `breaker opened` log lines, by endpoint key. */
  breakerOpened: Map<string, number>;
  /** Log lines at warn or above, by message. */
  warnings: Map<string, number>;
  stop(): Promise<void>;
}

/** The environment without anything that would change the process's defaults. */
function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env))
    if (!/^(WEBHOOK_|REQUEUE_|REDIS_URL$|PORT$|HOST$|LOG_LEVEL$|NODE_OPTIONS$)/.test(name))
      env[name] = value;
  return env;
}

async function startChild(
  mode: ModeId,
  redisUrl: string,
  logDir: string,
  label: string,
): Promise<Child> {
  const script =
    mode === 'worker' ? 'dist/workers/webhook/main.js' : 'dist/workers/service/main.js';
  const env: NodeJS.ProcessEnv = {
    ...cleanEnv(),
    REDIS_URL: redisUrl,
    // The one setting changed: the receivers are on loopback.
    WEBHOOK_ALLOW_PRIVATE: 'true',
    ...(mode === 'service' ? { PORT: '0', REQUEUE_DATA_DIR: join(logDir, 'data') } : {}),
  };
  const proc = spawn(process.execPath, [script], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const logFile = join(logDir, `${label}.log`);
  const log = createWriteStream(logFile);
  proc.stderr!.pipe(log, { end: false });
  const child: Child = {
    proc,
    url: undefined,
    logFile,
    breakerOpened: new Map(),
    warnings: new Map(),
    stop: async () => {
      if (proc.exitCode === null && proc.signalCode === null) {
        const exited = once(proc, 'exit');
        proc.kill('SIGTERM');
        const timer = setTimeout(() => proc.kill('SIGKILL'), 5_000);
        await exited;
        clearTimeout(timer);
      }
      log.end();
    },
  };
  const readyMsg = mode === 'worker' ? 'webhook worker started' : 'requeue service started';
  const ready = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${script} did not start in 30 s`)), 30_000);
    proc.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${script} exited (${code ?? signal}) before it was ready; see ${logFile}`));
    });
    createInterface({ input: proc.stdout! }).on('line', (line) => {
      log.write(`${line}\n`);
      let entry: { level?: number; msg?: string; key?: string; url?: string };
      try {
        entry = JSON.parse(line) as typeof entry;
      } catch {
        return;
      }
      if (entry.msg === 'breaker opened' && entry.key !== undefined)
        child.breakerOpened.set(entry.key, (child.breakerOpened.get(entry.key) ?? 0) + 1);
      if ((entry.level ?? 0) >= 40 && entry.msg !== 'breaker opened')
        child.warnings.set(entry.msg ?? '?', (child.warnings.get(entry.msg ?? '?') ?? 0) + 1);
      if (entry.msg === readyMsg) {
        clearTimeout(timer);
        if (entry.url !== undefined) child.url = entry.url;
        resolve();
      }
    });
  });
  try {
    await ready;
  } catch (err) {
    await child.stop();
    throw err;
  }
  return child;
}

// ---------------------------------------------------------------------------
// One case

interface Latency {
  sent: number;
  delivered: number;
  p50: number;
  p99: number;
  max: number;
  duplicates: number;
}

interface CaseResult {
  mode: ModeId;
  case: CaseId;
  healthy: Latency;
  /** The misbehaving endpoint: deliveries enqueued, requests it saw, most at once. */
  bad?: { sent: number; requests: number; maxInFlight: number };
  flaky?: {
    sent: number;
    delivered: number;
    /** First enqueue → the last flaky event's first 2xx; undefined if not all arrived. */
    allDeliveredMs: number | undefined;
    duplicates: number;
    requests: number;
  };
  /** Enqueue call → its acknowledgement (the intake's 202, or the Redis add), p99. */
  enqueueP99Ms: number;
  enqueueErrors: number;
  /** Case start → the wait ended (all delivered, or the deadline). */
  elapsedMs: number;
  counts: QueueCounts | undefined;
  breakerOpened: Record<string, number>;
  warnings: Record<string, number>;
  /** The service's /metrics: deferrals and breaker transitions (the service only). */
  metrics?: Record<string, number>;
  logFile: string;
}

function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

interface Job {
  endpoint: { id: string; url: string };
  event: { id: string; type: string; payload: { id: string } };
}

async function runCase(
  mode: ModeId,
  caseId: CaseId,
  redisUrl: string,
  logDir: string,
  options: Options,
): Promise<CaseResult> {
  const healthy = await startReceiver(() => ({ status: 204 }));
  const bad =
    caseId === '503'
      ? await startReceiver(() => ({ status: 503 }))
      : caseId === '429'
        ? await startReceiver(() => ({
            status: 429,
            headers: { 'retry-after': String(options.retryAfterS) },
          }))
        : caseId === 'hanging'
          ? await startReceiver(() => 'hang')
          : undefined;
  const flaky = caseId === 'flaky' ? await startReceiver(flakyAnswer) : undefined;
  // Nothing listens there: every connection is refused.
  const badUrl =
    caseId === 'refused' ? `http://127.0.0.1:${await freePort()}/hook` : bad && `${bad.base}/hook`;

  const child = await startChild(mode, redisUrl, logDir, `${mode}-${caseId}`);
  const producer =
    mode === 'worker' ? createQueue('webhooks', { connection: redisUrl }) : undefined;
  const submit = async (job: Job): Promise<void> => {
    if (producer) {
      await enqueueWebhook(producer, job);
      return;
    }
    const res = await fetch(`${child.url}/v1/webhooks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(job),
    });
    await res.arrayBuffer();
    if (res.status !== 202) throw new Error(`POST /v1/webhooks answered ${res.status}`);
  };

  const enqueuedAt = new Map<string, number>();
  const ackMs: number[] = [];
  let enqueueErrors = 0;
  const pending: Promise<void>[] = [];
  const fire = (job: Job): void => {
    const at = performance.now();
    enqueuedAt.set(job.event.id, at);
    pending.push(
      submit(job).then(
        () => void ackMs.push(performance.now() - at),
        () => void (enqueueErrors += 1),
      ),
    );
  };
  const event = (id: string) => ({ id, type: 'bench.tick', payload: { id } });

  const total = options.endpoints * options.perEndpoint;
  const interval = options.windowMs / total;
  let badSent = 0;
  let flakySent = 0;
  const start = performance.now();
  try {
    // A burst first: enough to take every slot if nothing bounded one endpoint's share.
    if (badUrl !== undefined)
      for (; badSent < webhookWorkerDefaults.concurrency; badSent += 1)
        fire({ endpoint: { id: 'bad', url: badUrl }, event: event(`b-${badSent}`) });
    for (let i = 0; i < total; i += 1) {
      await sleep(start + i * interval - performance.now());
      const e = i % options.endpoints;
      fire({
        endpoint: { id: `healthy-${e}`, url: `${healthy.base}/h/${e}` },
        event: event(`h-${i}`),
      });
      // One delivery in five more to the bad endpoint, all along.
      if (badUrl !== undefined && i % 5 === 0)
        fire({ endpoint: { id: 'bad', url: badUrl }, event: event(`b-${badSent++}`) });
      // The flaky population, spread over the same window.
      if (flaky)
        for (; flakySent < Math.floor(((i + 1) * options.flaky) / total); flakySent += 1) {
          const f = flakySent % options.flakyEndpoints;
          fire({
            endpoint: { id: `flaky-${f}`, url: `${flaky.base}/f/${f}` },
            event: event(`f-${flakySent}`),
          });
        }
    }
    await Promise.all(pending);
    const deadline = performance.now() + (flaky ? 90_000 : 30_000);
    const done = () =>
      healthy.firstArrival.size >= total && (!flaky || flaky.firstSuccess.size >= flakySent);
    while (!done() && performance.now() < deadline) await sleep(50);
    const elapsedMs = performance.now() - start;

    const counts = await readCounts(redisUrl);
    const metrics = child.url !== undefined ? await readMetrics(child.url) : undefined;

    const latencies: number[] = [];
    for (const [id, at] of enqueuedAt) {
      if (!id.startsWith('h-')) continue;
      const arrived = healthy.firstArrival.get(id);
      if (arrived !== undefined) latencies.push(arrived - at);
    }
    const duplicates = (r: Receiver) => [...r.delivered.values()].filter((n) => n > 1).length;
    let flakyResult: CaseResult['flaky'];
    if (flaky) {
      const successes = [...flaky.firstSuccess.values()];
      flakyResult = {
        sent: flakySent,
        delivered: flaky.firstSuccess.size,
        allDeliveredMs:
          flaky.firstSuccess.size >= flakySent ? Math.max(...successes) - start : undefined,
        duplicates: duplicates(flaky),
        requests: [...flaky.requests.values()].reduce((a, b) => a + b, 0),
      };
    }
    return {
      mode,
      case: caseId,
      healthy: {
        sent: total,
        delivered: latencies.length,
        p50: quantile(latencies, 0.5),
        p99: quantile(latencies, 0.99),
        max: latencies.length > 0 ? Math.max(...latencies) : Number.NaN,
        duplicates: duplicates(healthy),
      },
      ...(badUrl !== undefined
        ? {
            bad: {
              sent: badSent,
              requests: bad ? [...bad.requests.values()].reduce((a, b) => a + b, 0) : 0,
              maxInFlight: bad?.maxInFlight ?? 0,
            },
          }
        : {}),
      ...(flakyResult ? { flaky: flakyResult } : {}),
      enqueueP99Ms: quantile(ackMs, 0.99),
      enqueueErrors,
      elapsedMs,
      counts,
      breakerOpened: Object.fromEntries(child.breakerOpened),
      warnings: Object.fromEntries(child.warnings),
      ...(metrics ? { metrics } : {}),
      logFile: child.logFile,
    };
  } finally {
    await Promise.allSettled(pending);
    // The receivers go first: a hanging request is reset, so the process stops at once.
    await Promise.all([healthy.close(), bad?.close(), flaky?.close()]);
    await producer?.close();
    await child.stop();
  }
}

async function readCounts(redisUrl: string): Promise<QueueCounts | undefined> {
  const queue = createQueue('webhooks', { connection: redisUrl });
  try {
    return await queue.counts();
  } catch {
    return undefined;
  } finally {
    await queue.close();
  }
}

/** The service's deferral and breaker-transition counters, summed per label set. */
async function readMetrics(url: string): Promise<Record<string, number> | undefined> {
  try {
    const text = await (await fetch(`${url}/metrics`)).text();
    const out: Record<string, number> = {};
    for (const line of text.split('\n')) {
      const m =
        /^requeue_(jobs_deferred_total|breaker_transitions_total|jobs_dead_lettered_total|retries_scheduled_total)(\{[^}]*\})?\s+(\S+)/.exec(
          line,
        );
      if (!m) continue;
      const labels = (m[2] ?? '').replace(/queue="[^"]*",?/, '').replace(/[{}"]/g, '');
      const name = `${m[1]}${labels ? `{${labels}}` : ''}`;
      out[name] = (out[name] ?? 0) + Number(m[3]);
    }
    return out;
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------
// Report

interface Report {
  startedAt: string;
  durationS: number;
  command: string;
  revision: string;
  machine: Machine;
  loadAfter: number;
  options: Options;
  defaults: {
    worker: typeof webhookWorkerDefaults;
    breaker: typeof webhookBreakerDefaults;
  };
  results: CaseResult[];
  goals: { mode: ModeId; case: CaseId; goal: string; met: boolean; detail: string }[];
}

const ms = (v: number | undefined): string =>
  v === undefined || !Number.isFinite(v)
    ? '—'
    : v >= 10_000
      ? `${(v / 1000).toFixed(1)} s`
      : `${Math.round(v)} ms`;

function baselineOf(results: CaseResult[], mode: ModeId): CaseResult | undefined {
  return results.find((r) => r.mode === mode && r.case === 'baseline');
}

function evaluate(results: CaseResult[]): Report['goals'] {
  const goals: Report['goals'] = [];
  for (const r of results) {
    const base = baselineOf(results, r.mode);
    if (r.case !== 'baseline' && base) {
      const allThere = r.healthy.delivered === r.healthy.sent;
      const over = r.healthy.p99 - base.healthy.p99;
      goals.push({
        mode: r.mode,
        case: r.case,
        goal: `healthy p99 ≤ baseline + ${p99SlackMs / 1000} s`,
        met: allThere && over <= p99SlackMs,
        detail: allThere
          ? `p99 ${ms(r.healthy.p99)} vs baseline ${ms(base.healthy.p99)} (${over >= 0 ? '+' : ''}${ms(over)})` +
            (over > p99SlackMs && r.enqueueP99Ms - base.enqueueP99Ms > over / 2
              ? `; most of it before the job was queued: the enqueue's acknowledgement alone took p99 ${ms(r.enqueueP99Ms)} (baseline ${ms(base.enqueueP99Ms)})`
              : '')
          : `${r.healthy.sent - r.healthy.delivered} of ${r.healthy.sent} healthy deliveries never arrived`,
      });
    }
    if (r.flaky) {
      const f = r.flaky;
      const met =
        f.allDeliveredMs !== undefined && f.allDeliveredMs <= flakyGoalMs && f.duplicates === 0;
      goals.push({
        mode: r.mode,
        case: r.case,
        goal: `all flaky deliveries within ${flakyGoalMs / 1000} s, each once`,
        met,
        detail:
          f.allDeliveredMs !== undefined
            ? `${f.delivered}/${f.sent} in ${ms(f.allDeliveredMs)}, ${f.duplicates} delivered twice (${(
                f.delivered /
                (f.allDeliveredMs / 1000) /
                oldServiceRate
              ).toFixed(0)}× the old service's rate)`
            : `${f.delivered}/${f.sent} after ${ms(r.elapsedMs)}, ${f.duplicates} delivered twice`,
      });
    }
  }
  return goals;
}

function tableRows(report: Report): { header: string[]; rows: string[][] } {
  const header = [
    'process',
    'case',
    'healthy',
    'p50',
    'p99',
    'p99 − base',
    'max',
    'bad endpoint: sent / reqs / max at once',
    'flaky: delivered, all in, twice',
    'breaker opens',
    'dead',
    'goal',
  ];
  const rows = report.results.map((r) => {
    const base = baselineOf(report.results, r.mode);
    const goals = report.goals.filter((g) => g.mode === r.mode && g.case === r.case);
    const opens = Object.entries(r.breakerOpened)
      .map(([k, n]) => `${k}×${n}`)
      .join(' ');
    return [
      modeLabels[r.mode],
      caseLabels[r.case],
      `${r.healthy.delivered}/${r.healthy.sent}${r.healthy.duplicates ? ` (${r.healthy.duplicates} twice)` : ''}`,
      ms(r.healthy.p50),
      ms(r.healthy.p99),
      r.case === 'baseline' || !base ? '' : ms(r.healthy.p99 - base.healthy.p99),
      ms(r.healthy.max),
      r.bad
        ? `${r.bad.sent} / ${r.case === 'refused' ? '—' : r.bad.requests} / ${r.case === 'refused' ? '—' : r.bad.maxInFlight}`
        : '',
      r.flaky
        ? `${r.flaky.delivered}/${r.flaky.sent}, ${ms(r.flaky.allDeliveredMs)}, ${r.flaky.duplicates}`
        : '',
      opens || '0',
      r.counts ? String(r.counts.dead) : '?',
      goals.length === 0 ? '(reference)' : goals.every((g) => g.met) ? 'met' : 'MISSED',
    ];
  });
  return { header, rows };
}

function renderMarkdown(report: Report): string {
  const { header, rows } = tableRows(report);
  const o = report.options;
  const md = (cells: string[]) => `| ${cells.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`;
  const goalLines = report.goals.map(
    (g) =>
      `- ${g.met ? 'met' : '**MISSED**'} — ${modeLabels[g.mode]}, ${caseLabels[g.case]}: ${g.goal}; ${g.detail}`,
  );
  const notes = report.results.map((r) => {
    const parts: string[] = [];
    if (r.enqueueErrors > 0) parts.push(`${r.enqueueErrors} enqueue errors`);
    if (Object.keys(r.warnings).length > 0)
      parts.push(
        `warnings ${Object.entries(r.warnings)
          .map(([m, n]) => `"${m}" ×${n}`)
          .join(', ')}`,
      );
    if (r.metrics && Object.keys(r.metrics).length > 0)
      parts.push(
        `/metrics ${Object.entries(r.metrics)
          .map(([m, n]) => `${m} ${n}`)
          .join(', ')}`,
      );
    return `- ${modeLabels[r.mode]}, ${caseLabels[r.case]}: enqueue ack p99 ${ms(r.enqueueP99Ms)} (${r.mode === 'service' ? "the intake's 202" : 'the Redis add'})${parts.length > 0 ? `; ${parts.join('; ')}` : ''}`;
  });
  const m = report.machine;
  return `## Webhook isolation: healthy endpoints' latency next to a bad one, standalone worker and service

Written by \`bench/webhooks.bench.ts\` on ${report.startedAt} (the run took ${Math.round(report.durationS)} s).

- Command: \`${report.command}\`; code at ${report.revision}
- Machine: \`${m.uname}\`
- CPU: ${m.cpuModel}, ${m.cores} cores; 1-minute load average ${m.loadAverage.toFixed(2)} at the start, ${report.loadAfter.toFixed(2)} at the end (the process under test, Redis, the receivers and the producer share the cores)
- Node ${m.node}; redis-server ${m.redis} (a private redis-server started for the run, appendonly no, flushed between cases)
- Each case: a fresh child process with its default settings — \`node dist/workers/webhook/main.js\` (webhooks enqueued with \`enqueueWebhook\` from this process) or \`node dist/workers/service/main.js\` (webhooks posted to \`POST /v1/webhooks\`) — with only \`REDIS_URL\` and \`WEBHOOK_ALLOW_PRIVATE=true\` set. Defaults in effect: concurrency ${report.defaults.worker.concurrency}, a bulkhead of a quarter of it per endpoint, attempt timeout ${report.defaults.worker.timeoutMs / 1000} s, lock ${report.defaults.worker.lockDurationMs / 1000} s / stalled check ${report.defaults.worker.stalledIntervalMs / 1000} s, retry policy full-jitter 1–30 s × 5 attempts, breaker \`${JSON.stringify(report.defaults.breaker)}\`.
- Load: ${o.endpoints} healthy endpoints (answer 204 at once) × ${o.perEndpoint} deliveries, enqueued evenly over ${o.windowMs / 1000} s; the bad endpoint gets a burst of ${webhookWorkerDefaults.concurrency} deliveries first (enough to take every slot) and then one for every five healthy ones. 503: always 503, no Retry-After; 429: always 429 with \`Retry-After: ${o.retryAfterS}\`; refused: a loopback port nothing listens on; hanging: accepts, reads the body, never answers. Flaky: ${o.flaky} deliveries to ${o.flakyEndpoints} receivers spread over the same window, 40 % succeed at once, the rest fail 1–3 times first, alternately 503 and 429 with \`Retry-After: 1\`.
- Latency: the enqueue call (before the intake's POST or the Redis add) → the healthy receiver gets the request, same clock. A case ends when every healthy (and flaky) delivery arrived, or 30 s (flaky: 90 s) after the last enqueue.

${md(header)}
${md(header.map(() => '---'))}
${rows.map(md).join('\n')}

"bad endpoint": deliveries enqueued to it / requests it received (with retries) / most requests it had at once — a hanging endpoint's "at once" is the slots it holds. "breaker opens": \`breaker opened\` log lines per endpoint key. "dead": the DLQ when the case ended.

Goals (issue 13): healthy endpoints' p99 within ${p99SlackMs / 1000} s of the same process's baseline in every case; flaky receivers deliver everything (issue 13's "done when": 1,000 within ${flakyGoalMs / 1000} s, each once; the old service delivered 265 of 2,800 in 240 s, ${oldServiceRate.toFixed(1)}/s).

${goalLines.join('\n')}

${notes.length > 0 ? `Per case:\n\n${notes.join('\n')}\n` : ''}`;
}

// ---------------------------------------------------------------------------

function commandLine(): string {
  const script = relative(process.cwd(), process.argv[1] ?? 'bench/webhooks.bench.ts');
  const node = ['node', ...process.execArgv, script, ...process.argv.slice(2)].join(' ');
  return process.env.npm_lifecycle_event === 'bench:webhooks'
    ? `npm run bench:webhooks → ${node}`
    : node;
}

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

async function main(): Promise<void> {
  let parsed: ReturnType<typeof parseOptions>;
  try {
    parsed = parseOptions(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n\n${usage}`);
    process.exitCode = 2;
    return;
  }
  if (parsed === 'help') {
    process.stdout.write(usage);
    return;
  }
  if ('render' in parsed) {
    const saved = JSON.parse(await readFile(parsed.render, 'utf8')) as Report;
    saved.goals = evaluate(saved.results);
    await writeResultsSection(parsed.resultsPath, 'webhooks-bench', renderMarkdown(saved));
    log(`wrote ${parsed.resultsPath} from ${parsed.render}`);
    return;
  }
  const options = parsed;
  const startedAt = new Date();
  const clockStart = performance.now();
  const logDir = await mkdtemp(join(tmpdir(), 'requeue-bench-webhooks-'));
  const server = await startRedisServer({ appendonly: false });
  const admin = createRedis(server.url);
  try {
    const machine = await describeMachine(admin);
    // Read before the runs: the tree may change while they go on.
    const revision = describeRevision(['src', 'workers']);
    log(`redis ${machine.redis} at ${server.url}; child logs in ${logDir}`);
    const results: CaseResult[] = [];
    if (options.outage) {
      const report = await runOutage(server.url, admin, options.outage, log);
      const context = `\`${commandLine()}\`, ${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC, ${machine.cpuModel} × ${machine.cores} cores, Node ${machine.node}, Redis ${machine.redis} (a private server, appendonly no), load average ${machine.loadAverage.toFixed(1)} at the start and ${(loadavg()[0] ?? 0).toFixed(1)} at the end; one webhook worker in the bench's process with its defaults (only \`allowPrivate\` and the registry set), the receiver in the same process.`;
      const body = renderOutage(report, context);
      process.stdout.write(`${body}\n`);
      if (options.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
      if (options.resultsPath !== undefined)
        await writeResultsSection(
          options.resultsPath,
          // One section per outage length: a short one beside the full one.
          `webhooks-outage-${Math.round(options.outage.outageMs / 1000)}s`,
          body,
        );
      if (options.onlyOutage) return;
    }
    if (options.fanout > 0 && !options.onlyOutage) {
      const fanout = await runFanout(server.url, admin, options.fanout);
      const context = `\`${commandLine()}\`, ${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC, ${machine.cpuModel} × ${machine.cores} cores, Node ${machine.node}, Redis ${machine.redis} (a private server), load average ${machine.loadAverage.toFixed(1)} at the start; one webhook worker in the bench's process with its defaults, a loopback receiver, each of the ${options.fanout.toLocaleString('en-US')} endpoints registered with no type filter.`;
      const body = renderFanout(fanout, context);
      process.stdout.write(`${body}\n`);
      if (options.resultsPath !== undefined)
        await writeResultsSection(options.resultsPath, 'webhooks-fanout', body);
      if (options.onlyFanout) return;
    }
    for (const mode of options.modes)
      for (const caseId of options.cases) {
        await admin.flushall();
        const r = await runCase(mode, caseId, server.url, logDir, options);
        results.push(r);
        log(
          `${modeLabels[mode].padEnd(17)} ${caseId.padEnd(8)} healthy ${r.healthy.delivered}/${r.healthy.sent} ` +
            `p50 ${ms(r.healthy.p50)} p99 ${ms(r.healthy.p99)} max ${ms(r.healthy.max)}` +
            (r.flaky
              ? `; flaky ${r.flaky.delivered}/${r.flaky.sent} all in ${ms(r.flaky.allDeliveredMs)}, ${r.flaky.duplicates} twice`
              : '') +
            ` (${ms(r.elapsedMs)})`,
        );
      }
    const report: Report = {
      startedAt: startedAt.toISOString(),
      durationS: (performance.now() - clockStart) / 1000,
      command: commandLine(),
      revision,
      machine,
      loadAfter: loadavg()[0] ?? 0,
      options,
      defaults: { worker: webhookWorkerDefaults, breaker: webhookBreakerDefaults },
      results,
      goals: evaluate(results),
    };
    // With --json, stdout carries the JSON alone and the table goes to stderr.
    const out = options.json ? process.stderr : process.stdout;
    out.write('\n');
    const { header, rows } = tableRows(report);
    printTable(header, rows, out);
    out.write('\n');
    for (const g of report.goals)
      out.write(
        `${g.met ? 'met   ' : 'MISSED'}  ${modeLabels[g.mode]}, ${g.case}: ${g.goal}; ${g.detail}\n`,
      );
    if (options.resultsPath !== undefined) {
      await writeResultsSection(options.resultsPath, 'webhooks-bench', renderMarkdown(report));
      log(`wrote ${options.resultsPath}`);
    }
    if (options.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } finally {
    admin.disconnect();
    await server.stop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
