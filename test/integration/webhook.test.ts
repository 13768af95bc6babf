import { spawn } from 'node:child_process';
import { createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { pino, type Logger } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { redactPaths } from '../../src/config/logger.js';
import { EndpointStore } from '../../src/redis/endpoint-store.js';
import type { WorkerEvents } from '../../src/scheduler/events.js';
import { createQueue, type RequeueQueue } from '../../src/scheduler/queue.js';
import { ManualClock } from '../../src/util/fake-clock.js';
import {
  createWebhookWorker,
  enqueueWebhook,
  type WebhookJobInput,
  type WebhookWorker,
  type WebhookWorkerOptions,
} from '../../workers/webhook/index.js';
import { cleanQueue, connect, redisUrl, uniqueQueueName } from '../harness/redis.js';
import { onCleanup } from '../harness/cleanup.js';
import { cli } from '../harness/cli.js';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

/** Small, fixed retries: the tests wait on events, and these keep them short. */
const fastPolicy = { strategy: 'fixed', baseMs: 50, capMs: 50, maxAttempts: 5 } as const;

function newSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

// ---------------------------------------------------------------------------
// A receiver that checks what it gets the way a Standard Webhooks consumer
// must, written here from the spec rather than with the module under test.
// ---------------------------------------------------------------------------

type Reply =
  | 'hang'
  | {
      status: number;
      headers?: Record<string, string>;
      body?: string | ((req: IncomingMessage) => string);
    };

interface Received {
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

interface Receiver {
  url: string;
  origin: string;
  received: Received[];
  /** How many times each webhook-id was processed: the receiver dedupes by it. */
  processed: Map<string, number>;
  /** Resolves with the next request to arrive. */
  nextRequest(): Promise<Received>;
  close(): Promise<void>;
}

async function startReceiver(secret: string, script: Reply[] = []): Promise<Receiver> {
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

afterEach(() => {
  vi.restoreAllMocks();
});

const silent = pino({ level: 'silent' });

interface Setup {
  name: string;
  queue: RequeueQueue<unknown>;
  worker: WebhookWorker;
  retries: WorkerEvents['retry:scheduled'][0][];
}

async function setup(options: WebhookWorkerOptions = {}, name = uniqueQueueName('webhook')) {
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

/** Resolves with whichever of completed / dead-lettered comes first for `jobId`. */
function settled(worker: WebhookWorker, jobId: string) {
  return Promise.race([
    next(worker, 'job:completed', jobId).then((e) => ({ kind: 'completed' as const, ...e })),
    next(worker, 'job:dead-lettered', jobId).then((e) => ({ kind: 'dead' as const, ...e })),
  ]);
}

let eventCounter = 0;

function webhookJob(
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

// ---------------------------------------------------------------------------

describe('webhook delivery', () => {
  it('delivers an event exactly once after 503, 503, every attempt validly signed', async () => {
    const secret = newSecret();
    const receiver = await startReceiver(secret, [
      { status: 503, body: 'busy' },
      { status: 503, body: 'still busy' },
    ]);
    onCleanup(receiver.close);
    const { queue, worker, retries } = await setup();
    const job = webhookJob(receiver.url, secret);
    const added = await enqueueWebhook(queue, job);
    const outcome = await settled(worker, added.id);

    expect(outcome.kind).toBe('completed');
    expect(receiver.received).toHaveLength(3);
    expect(receiver.received.every((r) => r.valid)).toBe(true);
    expect(new Set(receiver.received.map((r) => r.id))).toEqual(new Set([job.event.id]));
    expect(receiver.processed.get(job.event.id)).toBe(1);
    // The body is the same on every attempt; each attempt has its own timestamp and signature.
    const bodies = new Set(receiver.received.map((r) => r.body));
    expect(bodies.size).toBe(1);
    const body = JSON.parse(receiver.received[0]!.body) as Record<string, unknown>;
    expect(body).toEqual({
      type: 'invoice.paid',
      timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      data: job.event.payload,
    });
    expect(receiver.received[0]!.headers['content-type']).toBe('application/json');
    expect(receiver.received[0]!.headers['user-agent']).toBe('requeue-webhooks/0.1');

    // Each failed attempt's status, latency and body start are in its history record.
    expect(retries.map((r) => r.record.details)).toEqual([
      { status: 503, latencyMs: expect.any(Number), body: 'busy' },
      { status: 503, latencyMs: expect.any(Number), body: 'still busy' },
    ]);
    expect(retries.map((r) => r.record.error?.status)).toEqual([503, 503]);

    // The same event for the same endpoint again is the same job: not delivered twice.
    const again = await enqueueWebhook(queue, job);
    expect(again.id).toBe(added.id);
  });

  it('signs with every secret during a rotation and keeps user headers, never over webhook-*', async () => {
    const [current, old] = [newSecret(), newSecret()];
    const oldReceiver = await startReceiver(old);
    onCleanup(oldReceiver.close);
    const { queue, worker } = await setup();
    const job = {
      ...webhookJob(oldReceiver.url, [current, old]),
      headers: { 'X-Tenant': 'acme', 'Webhook-Id': 'forged', 'Content-Type': 'text/plain' },
    };
    const added = await enqueueWebhook(queue, job);
    expect((await settled(worker, added.id)).kind).toBe('completed');
    const [request] = oldReceiver.received;
    expect(request?.valid).toBe(true);
    expect(request?.signature.split(' ')).toHaveLength(2);
    expect(request?.headers['x-tenant']).toBe('acme');
    expect(request?.id).toBe(job.event.id);
    expect(request?.headers['content-type']).toBe('application/json');
  });

  it('honours Retry-After: after a 429 with Retry-After: 1 the next request comes ≥ 1 s later', async () => {
    const secret = newSecret();
    const receiver = await startReceiver(secret, [
      { status: 429, headers: { 'retry-after': '1' }, body: 'slow down' },
    ]);
    onCleanup(receiver.close);
    const { queue, worker, retries } = await setup();
    const added = await enqueueWebhook(queue, webhookJob(receiver.url, secret));
    expect((await settled(worker, added.id)).kind).toBe('completed');

    const [first, second] = receiver.received;
    expect(second!.at - first!.at).toBeGreaterThanOrEqual(1000);
    expect(retries[0]?.record).toMatchObject({
      delaySource: 'server',
      delayMs: 1000,
      classification: 'http-status',
      details: { status: 429 },
    });
  });

  it('410 dead-letters the job as gone and disables the endpoint; enable restores delivery', async () => {
    const secret = newSecret();
    const receiver = await startReceiver(secret, [{ status: 410, body: 'unsubscribed' }]);
    onCleanup(receiver.close);
    const { name, queue, worker } = await setup();

    const first = await enqueueWebhook(queue, webhookJob(receiver.url, secret, 'ep-gone'));
    const gone = await settled(worker, first.id);
    expect(gone.kind).toBe('dead');
    if (gone.kind !== 'dead') return;
    expect(gone.record.reason).toBe('gone');
    expect(gone.record.attempts).toBe(1);
    expect(gone.record.message).toContain('answered 410 Gone; endpoint "ep-gone" is now disabled');
    expect(gone.record.history[0]?.details).toMatchObject({ status: 410, body: 'unsubscribed' });
    expect(await worker.endpoints.isDisabled(name, 'ep-gone')).toBe(true);

    // The next job for that endpoint dies without a request reaching the receiver.
    const second = await enqueueWebhook(queue, webhookJob(receiver.url, secret, 'ep-gone'));
    const skipped = await settled(worker, second.id);
    expect(skipped.kind).toBe('dead');
    if (skipped.kind !== 'dead') return;
    expect(skipped.record.reason).toBe('endpoint-disabled');
    expect(skipped.record.message).toContain(`requeue endpoint enable ${name} ep-gone`);
    expect(receiver.received).toHaveLength(1);

    // Another endpoint of the same queue is not affected.
    const other = await enqueueWebhook(queue, webhookJob(receiver.url, secret, 'ep-other'));
    expect((await settled(worker, other.id)).kind).toBe('completed');

    // The CLI lists it and enables it; the worker sees the enable at once.
    const listed = await cli('endpoint', 'list', name, '--json');
    expect(listed.code).toBe(0);
    expect(JSON.parse(listed.stdout)).toEqual([
      {
        endpointId: 'ep-gone',
        reason: `410 Gone from ${receiver.origin}`,
        disabledAt: expect.any(Number),
      },
    ]);
    expect(await cli('endpoint', 'enable', name, 'ep-gone')).toEqual({
      code: 0,
      stdout: 'enabled ep-gone\n',
    });
    const third = await enqueueWebhook(queue, webhookJob(receiver.url, secret, 'ep-gone'));
    expect((await settled(worker, third.id)).kind).toBe('completed');
    expect(receiver.received).toHaveLength(3);
    expect((await cli('endpoint', 'list', name)).stdout).toBe('no disabled endpoints\n');

    // An operator disables one by hand (workers see it within their cache TTL, 1 s).
    expect(
      await cli('endpoint', 'disable', name, 'ep-other', '--reason', 'customer asked'),
    ).toEqual({ code: 0, stdout: 'disabled ep-other\n' });
    const table = (await cli('endpoint', 'list', name)).stdout;
    expect(table).toMatch(
      /^ENDPOINT +DISABLED AT +REASON\nep-other +\d{4}-\d\d-\d\dT\S+ +customer asked\n$/,
    );
    expect((await cli('endpoint', 'disable', name, 'ep-other', '--reason', ' ')).code).toBe(2);
  });

  it('refuses 127.0.0.1 by default (SSRF) without sending anything; the allowlist opens it', async () => {
    const secret = newSecret();
    const receiver = await startReceiver(secret);
    onCleanup(receiver.close);
    const guarded = await setup({ allowHosts: [] });

    const literal = await enqueueWebhook(guarded.queue, webhookJob(receiver.url, secret));
    const refused = await settled(guarded.worker, literal.id);
    expect(refused.kind).toBe('dead');
    if (refused.kind !== 'dead') return;
    expect(refused.record.reason).toBe('permanent-error');
    expect(refused.record.attempts).toBe(1);
    expect(refused.record.message).toBe(
      'refused to connect to 127.0.0.1: a loopback address, blocked against SSRF; allow it with allowPrivate or allowHosts',
    );

    // A name that resolves to loopback is refused at connect time, by the lookup.
    const port = new URL(receiver.url).port;
    const named = await enqueueWebhook(
      guarded.queue,
      webhookJob(`http://localhost:${port}/hook`, secret),
    );
    const refusedByName = await settled(guarded.worker, named.id);
    expect(refusedByName.kind).toBe('dead');
    if (refusedByName.kind !== 'dead') return;
    expect(refusedByName.record.message).toMatch(
      /^refused to connect to localhost \((127\.0\.0\.1|::1)\): a loopback address/,
    );
    expect(receiver.received).toHaveLength(0);

    const open = await setup({ allowHosts: ['127.0.0.1'] });
    const allowed = await enqueueWebhook(open.queue, webhookJob(receiver.url, secret));
    expect((await settled(open.worker, allowed.id)).kind).toBe('completed');
    const privateOk = await setup({ allowHosts: [], allowPrivate: true });
    const alsoAllowed = await enqueueWebhook(privateOk.queue, webhookJob(receiver.url, secret));
    expect((await settled(privateOk.worker, alsoAllowed.id)).kind).toBe('completed');
    expect(receiver.received).toHaveLength(2);
  });

  it('retries a timed-out attempt (a receiver that never answers, timeoutMs 200)', async () => {
    const secret = newSecret();
    const receiver = await startReceiver(secret, ['hang']);
    onCleanup(receiver.close);
    const { queue, worker, retries } = await setup({ timeoutMs: 200 });
    const added = await enqueueWebhook(queue, webhookJob(receiver.url, secret));
    expect((await settled(worker, added.id)).kind).toBe('completed');
    expect(receiver.received).toHaveLength(2);
    expect(retries).toHaveLength(1);
    expect(retries[0]!.record).toMatchObject({
      classification: 'timeout',
      error: { code: 'ETIMEDOUT', message: `POST ${receiver.origin} timed out after 200 ms` },
      details: { code: 'ETIMEDOUT' },
    });
    // A 200 ms timer may fire when the millisecond clock has moved 199 ms.
    expect(retries[0]!.record.details?.latencyMs).toBeGreaterThanOrEqual(195);
  });

  it('treats a 3xx as a retryable failure and does not follow it', async () => {
    const secret = newSecret();
    const receiver = await startReceiver(secret);
    onCleanup(receiver.close);
    // Scripted after start so the redirect can point at the receiver itself.
    const script = await startReceiver(secret, [
      { status: 302, headers: { location: `${receiver.url}/moved` } },
    ]);
    onCleanup(script.close);
    const { queue, worker, retries } = await setup();
    const added = await enqueueWebhook(queue, webhookJob(script.url, secret));
    expect((await settled(worker, added.id)).kind).toBe('completed');
    expect(receiver.received).toHaveLength(0);
    expect(script.received).toHaveLength(2);
    expect(retries[0]!.record).toMatchObject({
      classification: 'retryable-error',
      error: { status: 302 },
    });
  });

  it('dead-letters a 400 after one attempt, the answer in its history', async () => {
    const secret = newSecret();
    const receiver = await startReceiver(secret, [
      { status: 400, body: '{"error":"unknown event type"}' },
    ]);
    onCleanup(receiver.close);
    const { queue, worker } = await setup();
    const added = await enqueueWebhook(queue, webhookJob(receiver.url, secret));
    const outcome = await settled(worker, added.id);
    expect(outcome.kind).toBe('dead');
    if (outcome.kind !== 'dead') return;
    expect(outcome.record).toMatchObject({
      reason: 'permanent-error',
      attempts: 1,
      message: `POST ${receiver.origin} answered 400 Bad Request: {"error":"unknown event type"}`,
    });
    expect(outcome.record.history[0]?.details).toEqual({
      status: 400,
      latencyMs: expect.any(Number),
      body: '{"error":"unknown event type"}',
    });
  });

  it('never writes the secret or a signature to the log, even when the receiver echoes them', async () => {
    const secret = newSecret();
    const echo = (req: IncomingMessage): string =>
      `bad signature ${String(req.headers['webhook-signature'])} for secret ${secret}`;
    const receiver = await startReceiver(secret, [
      { status: 503, body: echo },
      { status: 200 },
      { status: 400, body: echo },
    ]);
    onCleanup(receiver.close);
    const lines: string[] = [];
    const logger: Logger = pino(
      { level: 'trace', redact: { paths: redactPaths, censor: '[redacted]' } },
      { write: (line: string) => lines.push(line) },
    );
    const { queue, worker } = await setup({ logger });

    const retried = await enqueueWebhook(queue, webhookJob(receiver.url, secret));
    expect((await settled(worker, retried.id)).kind).toBe('completed');
    const refused = await enqueueWebhook(queue, webhookJob(receiver.url, secret));
    const dead = await settled(worker, refused.id);
    expect(dead.kind).toBe('dead');
    // A payload that fails validation (a second, too short secret) is logged too.
    const invalid = await queue.add('invoice.paid', {
      ...webhookJob(receiver.url, secret),
      endpoint: { id: 'ep-1', url: receiver.url, secret: [secret, 'whsec_c2hvcnQ='] },
    });
    expect((await settled(worker, invalid.id)).kind).toBe('dead');

    const log = lines.join('');
    expect(log).toContain('retry scheduled');
    expect(log).toContain('job dead-lettered');
    expect(log).toContain('invalid-payload');
    expect(log).toContain('[redacted]'); // the echoed values, blanked in the error messages
    expect(log).not.toContain(secret.slice('whsec_'.length));
    expect(receiver.received.length).toBeGreaterThanOrEqual(3);
    for (const request of receiver.received) {
      for (const signature of request.signature.split(' ')) {
        expect(log).not.toContain(signature.slice('v1,'.length));
      }
    }
    // The history keeps the body start, with the same values blanked.
    if (dead.kind === 'dead') {
      const body = String(dead.record.history[0]?.details?.body);
      expect(body).toMatch(/^bad signature \[redacted\] for secret \[redacted\]$/);
    }
  });
});

describe('the endpoint store', () => {
  it('answers from a cache for up to cacheTtlMs, but confirms "disabled" before acting on it', async () => {
    const name = uniqueQueueName('endpoints');
    const clock = new ManualClock(1_700_000_000_000);
    const cached = new EndpointStore({ connection: redisUrl(), clock, cacheTtlMs: 1000 });
    const other = new EndpointStore({ connection: redisUrl(), cacheTtlMs: 0 });
    onCleanup(async () => {
      await cached.close();
      await other.close();
      const redis = connect();
      await cleanQueue(redis, name);
      redis.disconnect();
    });

    expect(await cached.isDisabled(name, 'ep')).toBe(false);
    expect(await other.disable(name, 'ep', 'elsewhere', 42)).toBe(true);
    // Disabled elsewhere: not seen until the copy is older than the TTL.
    expect(await cached.isDisabled(name, 'ep')).toBe(false);
    clock.advance(1000);
    expect(await cached.get(name, 'ep')).toEqual({
      endpointId: 'ep',
      reason: 'elsewhere',
      disabledAt: 42,
    });
    // Enabled elsewhere: seen at once, since "disabled" is always confirmed.
    expect(await other.enable(name, 'ep')).toBe(true);
    expect(await cached.isDisabled(name, 'ep')).toBe(false);
    expect(await other.enable(name, 'ep')).toBe(false);
    // Disabled here: seen here at once.
    expect(await cached.disable(name, 'ep', 'here')).toBe(true);
    expect(await cached.isDisabled(name, 'ep')).toBe(true);
    expect(await cached.disable(name, 'ep', 'again')).toBe(false);
    expect(await other.list(name)).toEqual([
      { endpointId: 'ep', reason: 'again', disabledAt: clock.now() },
    ]);
  });
});

describe('workers/webhook/main.ts', () => {
  it('delivers, then drains and exits 0 on SIGTERM', async () => {
    const secret = newSecret();
    const receiver = await startReceiver(secret);
    onCleanup(receiver.close);
    const name = uniqueQueueName('webhook-main');
    const queue = createQueue(name, { connection: redisUrl() });
    onCleanup(async () => {
      await queue.close();
      const redis = connect();
      await cleanQueue(redis, name);
      redis.disconnect();
    });

    const child = spawn(process.execPath, ['--import', 'tsx', 'workers/webhook/main.ts'], {
      cwd: repoRoot,
      env: {
        ...process.env,
        REDIS_URL: redisUrl(),
        WEBHOOK_QUEUE: name,
        WEBHOOK_CONCURRENCY: '2',
        WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
        LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = once(child, 'exit');
    let output = '';
    const started = new Promise<void>((resolve) => {
      child.stdout.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('webhook worker started')) resolve();
      });
    });
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    await Promise.race([started, exited.then(() => Promise.reject(new Error(output)))]);

    const request = receiver.nextRequest();
    await enqueueWebhook(queue, webhookJob(receiver.url, secret));
    expect((await request).valid).toBe(true);

    child.kill('SIGTERM');
    const [code] = await exited;
    expect(code).toBe(0);
    expect(output).toContain('draining');
    expect(output).toContain('stopped');
    expect(output).not.toContain(secret.slice('whsec_'.length));
  });

  it('exits 2 naming a bad variable', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'workers/webhook/main.ts'], {
      cwd: repoRoot,
      env: { ...process.env, REDIS_URL: redisUrl(), WEBHOOK_CONCURRENCY: 'many' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const [code] = await once(child, 'exit');
    expect(code).toBe(2);
    expect(stderr).toContain('env.WEBHOOK_CONCURRENCY');
  });
});
