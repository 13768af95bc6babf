import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
// The built package, as users run it (`npm run build` first; the bench script does).
import type { ModeId } from './options.js';

/**
 * The bench's loopback receivers (an answer per request, flaky ones failing each
 * event 1–3 times first) and the worker or service child process under test.
 */

/** What a receiver answers to the `nth` request for an event: a status, or nothing ever. */
export type Answer = { status: number; headers?: Record<string, string> } | 'hang';

export interface Receiver {
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

export async function startReceiver(
  answer: (nth: number, eventId: string) => Answer,
): Promise<Receiver> {
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
export function flakyAnswer(nth: number, eventId: string): Answer {
  const i = Number(eventId.slice(2));
  const failures = i % 5 < 2 ? 0 : 1 + (i % 3);
  if (nth > failures) return { status: 200 };
  return i % 2 === 0 ? { status: 429, headers: { 'retry-after': '1' } } : { status: 503 };
}

// ---------------------------------------------------------------------------
// The process under test

export interface Child {
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

export async function startChild(
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
