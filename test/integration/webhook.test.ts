import type { IncomingMessage } from 'node:http';
import { pino, type Logger } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { redactPaths } from '../../src/config/logger.js';
import { enqueueWebhook } from '../../workers/webhook/index.js';
import { onCleanup } from '../harness/cleanup.js';
import { cli } from '../harness/cli.js';
import { newSecret, startReceiver, setup, settled, webhookJob } from './webhook-helpers.js';

afterEach(() => {
  vi.restoreAllMocks();
});

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
