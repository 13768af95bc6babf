import { createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import type { WorkerEvents } from '../../src/scheduler/events.js';
import { createQueue, type RequeueQueue } from '../../src/scheduler/queue.js';
import {
  createWebhookWorker,
  type WebhookJobInput,
  type WebhookWorker,
  type WebhookWorkerOptions,
} from '../../workers/webhook/index.js';
import { cleanQueue, connect, redisUrl, uniqueQueueName } from '../harness/redis.js';
import { onCleanup } from '../harness/cleanup.js';

/**
 * Shared by the webhook worker's integration tests: signing secrets, a receiver
 * that verifies signatures from the spec, a queue with a webhook worker cleaned
 * up after the test, its events, and webhook jobs.
 */

/** Small, fixed retries: the tests wait on events, and these keep them short. */
const fastPolicy = { strategy: 'fixed', baseMs: 50, capMs: 50, maxAttempts: 5 } as const;

export function newSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

// ---------------------------------------------------------------------------
// A receiver that checks what it gets the way a Standard Webhooks consumer
// must, written here from the spec rather than with the module under test.
// ---------------------------------------------------------------------------

export type Reply =
  | 'hang'
  | {
      status: number;
      headers?: Record<string, string>;
      body?: string | ((req: IncomingMessage) => string);
    };

export interface Received {
  path: string;
  id: string;
  timestamp: string;
  signature: string;
  body: string;
  headers: IncomingHttpHeaders;
  valid: boolean;
  at: number;
}

function verifiedByReceiver(
  secret: string,
  headers: IncomingHttpHeaders,
  body: Buffer,
  nowMs: number,
): boolean {
  const id = headers['webhook-id'];
  const timestamp = headers['webhook-timestamp'];
  const signatures = headers['webhook-signature'];
  if (typeof id !== 'string' || typeof timestamp !== 'string' || typeof signatures !== 'string')
    return false;
  if (!/^\d+$/.test(timestamp) || Math.abs(nowMs / 1000 - Number(timestamp)) > 300) return false;
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body).digest();
  return signatures.split(' ').some((entry) => {
    const [version, encoded] = entry.split(',');
    if (version !== 'v1' || !encoded) return false;
    const given = Buffer.from(encoded, 'base64');
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

export interface Receiver {
  url: string;
  origin: string;
  received: Received[];
  /** How many times each webhook-id was processed: the receiver dedupes by it. */
  processed: Map<string, number>;
  /** Resolves with the next request to arrive. */
  nextRequest(): Promise<Received>;
  close(): Promise<void>;
}

export async function startReceiver(secret: string, script: Reply[] = []): Promise<Receiver> {
  const received: Received[] = [];
  const processed = new Map<string, number>();
  const seen = new Set<string>();
  const waiting: ((r: Received) => void)[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const at = Date.now();
      const entry: Received = {
        path: req.url ?? '',
        id: String(req.headers['webhook-id']),
        timestamp: String(req.headers['webhook-timestamp']),
        signature: String(req.headers['webhook-signature']),
        body: body.toString('utf8'),
        headers: req.headers,
        valid: verifiedByReceiver(secret, req.headers, body, at),
        at,
      };
      received.push(entry);
      for (const resolve of waiting.splice(0)) resolve(entry);
      const reply = script.shift() ?? { status: entry.valid ? 200 : 401 };
      if (reply === 'hang') return;
      if (entry.valid && reply.status >= 200 && reply.status < 300 && !seen.has(entry.id)) {
        seen.add(entry.id);
        processed.set(entry.id, (processed.get(entry.id) ?? 0) + 1);
      }
      res.writeHead(reply.status, reply.headers);
      res.end(typeof reply.body === 'function' ? reply.body(req) : (reply.body ?? ''));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    origin: `http://127.0.0.1:${port}`,
    received,
    processed,
    nextRequest: () => new Promise((resolve) => waiting.push(resolve)),
    close: async () => {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

// ---------------------------------------------------------------------------
// Workers, queues and events
// ---------------------------------------------------------------------------

const silent = pino({ level: 'silent' });

export interface Setup {
  name: string;
  queue: RequeueQueue<unknown>;
  worker: WebhookWorker;
  retries: WorkerEvents['retry:scheduled'][0][];
}

export async function setup(options: WebhookWorkerOptions = {}, name = uniqueQueueName('webhook')) {
  const queue = createQueue(name, { connection: redisUrl() });
  const worker = createWebhookWorker(name, {
    connection: redisUrl(),
    policy: fastPolicy,
    allowHosts: ['127.0.0.1'],
    logger: silent,
    ...options,
  });
  const retries: Setup['retries'] = [];
  worker.on('retry:scheduled', (event) => retries.push(event));
  onCleanup(async () => {
    await worker.close({ timeoutMs: 2000 });
    await queue.close();
    const redis = connect();
    await cleanQueue(redis, name);
    redis.disconnect();
  });
  await worker.waitUntilReady();
  return { name, queue, worker, retries } satisfies Setup;
}

/** Resolves with the first `event` from `worker` for `jobId`. */
function next<K extends 'job:completed' | 'job:dead-lettered'>(
  worker: WebhookWorker,
  event: K,
  jobId: string,
): Promise<WorkerEvents[K][0]> {
  return new Promise((resolve) => {
    const listener = (payload: WorkerEvents[K][0]): void => {
      if (payload.jobId !== jobId) return;
      worker.off(event, listener as never);
      resolve(payload);
    };
    worker.on(event, listener as never);
  });
}

/**
 * Resolves with whichever of completed / dead-lettered comes first for
 * `jobId`; after `timeoutMs`, fails naming the job (an unexplained 30 s stall
 * in CI said only "Test timed out", not which job never settled).
 */
export function settled(worker: WebhookWorker, jobId: string, timeoutMs = 20_000) {
  let timer: NodeJS.Timeout | undefined;
  const stalled = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`job ${jobId} neither completed nor dead after ${timeoutMs} ms`)),
      timeoutMs,
    );
  });
  return Promise.race([
    next(worker, 'job:completed', jobId).then((e) => ({ kind: 'completed' as const, ...e })),
    next(worker, 'job:dead-lettered', jobId).then((e) => ({ kind: 'dead' as const, ...e })),
    stalled,
  ]).finally(() => clearTimeout(timer));
}

let eventCounter = 0;

export function webhookJob(
  url: string,
  secret: string | string[] | undefined,
  endpointId = 'ep-1',
): WebhookJobInput {
  eventCounter += 1;
  return {
    endpoint: { id: endpointId, url, ...(secret !== undefined ? { secret } : {}) },
    event: {
      id: `evt_${randomUUID()}`,
      type: 'invoice.paid',
      payload: { invoice: eventCounter, amount: 1200 },
    },
  };
}
