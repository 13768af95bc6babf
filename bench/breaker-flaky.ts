/**
 * The breaker against endpoints that fail but are not down, and one that is:
 * real webhook processes (`dist/workers/webhook/main.js`, or the service's
 * `dist/workers/service/main.js`) with their defaults, on a private Redis,
 * delivering to receivers on loopback. Used by `bench/breaker.bench.ts`
 * (`--only flaky`).
 *
 * - flaky: one endpoint, every event's first attempt answered 503 and every
 *   retry 200; 300 events through the webhook worker.
 * - mix: 1,000 webhooks to 5 endpoints through the service; 40 % of events
 *   succeed at once, the rest fail 1–3 times first, alternately 429
 *   (`Retry-After: 1`) and 503.
 * - mix-503: the same with every failure a 503 (no 429, so no pause): what
 *   the breaker alone does to the mix.
 * - down: 300 events to an endpoint that answers 503 to everything, through
 *   the webhook worker: the requests it receives once its breaker opened.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import { createQueue } from '../src/scheduler/queue.js';
import { enqueueWebhook } from '../workers/webhook/webhook-worker.js';

export type FlakyCaseId = 'flaky' | 'mix' | 'mix-503' | 'down';

/** What one case saw within its time limit. */
export interface FlakyResult {
  case: FlakyCaseId;
  events: number;
  /** Events answered 2xx at least once within the limit. */
  delivered: number;
  /** First enqueue → the last event's first 2xx (undefined: not all arrived). */
  allDeliveredMs: number | undefined;
  requests: number;
  /** `breaker opened` log lines. */
  opens: number;
  /** down: requests the endpoint received after the first opening, and over how long. */
  afterOpen?: { requests: number; spanMs: number };
}

type Answer = { status: number; headers?: Record<string, string> };

interface Receiver {
  base: string;
  firstSuccess: Map<string, number>;
  /** Arrival times of every request. */
  arrivals: number[];
  close(): Promise<void>;
}

async function startReceiver(answer: (nth: number, eventId: string) => Answer): Promise<Receiver> {
  const seen = new Map<string, number>();
  const r: Receiver = { base: '', firstSuccess: new Map(), arrivals: [], close: async () => {} };
  const server = createServer((req, res) => {
    const eventId = String(req.headers['webhook-id']);
    const nth = (seen.get(eventId) ?? 0) + 1;
    seen.set(eventId, nth);
    r.arrivals.push(performance.now());
    req.resume();
    req.once('end', () => {
      const a = answer(nth, eventId);
      if (a.status < 300 && !r.firstSuccess.has(eventId))
        r.firstSuccess.set(eventId, performance.now());
      res.writeHead(a.status, a.headers).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  r.base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  r.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return r;
}

/**
 * The mix: of every 5 events of an endpoint (event `i` goes to endpoint
 * `i mod 5`, so `n = ⌊i / 5⌋` numbers them per endpoint), 2 succeed at once
 * and 3 fail (n mod 3) + 1 times first, alternately 429 (`Retry-After: 1`)
 * and 503: 60 % fail first on every endpoint.
 */
export function mixAnswer(nth: number, eventId: string, with429 = true): Answer {
  const i = Math.floor(Number(eventId.split('-')[1]) / 5);
  const failures = i % 5 < 2 ? 0 : 1 + (i % 3);
  if (nth > failures) return { status: 200 };
  return with429 && i % 2 === 0
    ? { status: 429, headers: { 'retry-after': '1' } }
    : { status: 503 };
}

interface Child {
  url: string | undefined;
  opens: { at: number }[];
  stop(): Promise<void>;
}

/** Starts the webhook worker or the service with its defaults (loopback receivers allowed). */
async function startChild(script: string, redisUrl: string, root: string): Promise<Child> {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env))
    if (!/^(WEBHOOK_|REQUEUE_|REDIS_URL$|PORT$|HOST$|LOG_LEVEL$|NODE_OPTIONS$)/.test(name))
      env[name] = value;
  Object.assign(env, { REDIS_URL: redisUrl, WEBHOOK_ALLOW_PRIVATE: 'true', PORT: '0' });
  const proc: ChildProcess = spawn(process.execPath, [script], {
    cwd: root,
    env,
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const child: Child = {
    url: undefined,
    opens: [],
    stop: async () => {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      const exited = once(proc, 'exit');
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${script} did not start in 30 s`)), 30_000);
    proc.once('exit', (code) => reject(new Error(`${script} exited (${code}) before ready`)));
    createInterface({ input: proc.stdout! }).on('line', (line) => {
      let entry: { msg?: string; url?: string };
      try {
        entry = JSON.parse(line) as typeof entry;
      } catch {
        return;
      }
      if (entry.msg === 'breaker opened') child.opens.push({ at: performance.now() });
      if (entry.msg === 'webhook worker started' || entry.msg === 'requeue service started') {
        clearTimeout(timer);
        child.url = entry.url;
        resolve();
      }
    });
  });
  return child;
}

/**
 * Runs one case on `redisUrl` (a fresh Redis: the queue is the default
 * `webhooks`) with the built processes of the checkout at `root` (this one,
 * or another commit's for a side-by-side reference).
 */
export async function runFlakyCase(
  caseId: FlakyCaseId,
  redisUrl: string,
  root = process.cwd(),
  limitMs = 60_000,
): Promise<FlakyResult> {
  const service = caseId === 'mix' || caseId === 'mix-503';
  const events = service ? 1_000 : 300;
  const receiver = await startReceiver(
    caseId === 'flaky'
      ? (nth) => ({ status: nth === 1 ? 503 : 200 })
      : caseId === 'down'
        ? () => ({ status: 503 })
        : (nth, id) => mixAnswer(nth, id, caseId === 'mix'),
  );
  const child = await startChild(
    service ? 'dist/workers/service/main.js' : 'dist/workers/webhook/main.js',
    redisUrl,
    root,
  );
  const producer = service ? undefined : createQueue('webhooks', { connection: redisUrl });
  try {
    const start = performance.now();
    const jobs = Array.from({ length: events }, (_, i) => ({
      endpoint: { id: `ep-${i % (service ? 5 : 1)}`, url: `${receiver.base}/${i % 5}` },
      event: { id: `e-${i}`, type: 'bench.breaker', payload: { i } },
    }));
    await Promise.all(
      jobs.map(async (job) => {
        if (producer) return void (await enqueueWebhook(producer, job));
        const res = await fetch(`${child.url}/v1/webhooks`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(job),
        });
        await res.arrayBuffer();
        if (res.status !== 202) throw new Error(`POST /v1/webhooks answered ${res.status}`);
      }),
    );
    const deadline = start + limitMs;
    while (performance.now() < deadline && receiver.firstSuccess.size < events)
      await new Promise((resolve) => setTimeout(resolve, 100));
    const firstOpen = child.opens[0]?.at;
    const end = Math.min(performance.now(), deadline);
    return {
      case: caseId,
      events,
      delivered: [...receiver.firstSuccess.values()].filter((at) => at <= deadline).length,
      allDeliveredMs:
        receiver.firstSuccess.size >= events
          ? Math.max(...receiver.firstSuccess.values()) - start
          : undefined,
      requests: receiver.arrivals.filter((at) => at <= deadline).length,
      opens: child.opens.length,
      ...(caseId === 'down' && firstOpen !== undefined
        ? {
            afterOpen: {
              requests: receiver.arrivals.filter((at) => at > firstOpen + 100 && at <= end).length,
              spanMs: end - firstOpen - 100,
            },
          }
        : {}),
    };
  } finally {
    await child.stop();
    await producer?.close();
    await receiver.close();
  }
}
