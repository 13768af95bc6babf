/**
 * One delivery attempt of a webhook: a signed JSON POST over node:http(s)
 * through the SSRF guard, judged the way Standard Webhooks asks a sender to
 * judge the answer.
 *
 * @see https://www.standardwebhooks.com/ ("Delivery success and failure")
 */
import { STATUS_CODES, type Agent as HttpAgent, type IncomingHttpHeaders } from 'node:http';
import type { Agent as HttpsAgent } from 'node:https';
import { isIP } from 'node:net';
import { isPermanentError, PermanentError } from '../../src/errors/permanent-error.js';
import { RetryableError } from '../../src/errors/retryable-error.js';
import { systemClock, type Clock } from '../../src/util/system.js';
import { WebhookDeliveryError } from './delivery-error.js';
import type { DeliveryDetails, DeliveryResult, WebhookDelivery } from './delivery-types.js';
import { send, type RawResponse } from './http-send.js';
import { collectSentSecrets } from './sent-secrets.js';
import { signWebhook, webhookHeaders } from './signature.js';
import { createSsrfGuard, type SsrfGuard, type SsrfOptions } from './ssrf.js';
import { requestHeaders, webhookBody } from './webhook-request.js';

// What the webhook worker and the public barrel import from here.
export type { DeliveryDetails, DeliveryResult, WebhookDelivery } from './delivery-types.js';
export { WebhookDeliveryError } from './delivery-error.js';
export { webhookBody } from './webhook-request.js';

/** Options of {@link deliverWebhook}. */
export interface DeliverOptions extends SsrfOptions {
  /**
   * Deadline of the attempt until the response's status line and headers
   * arrive (connect included), in ms. @defaultValue `15_000`
   */
  timeoutMs?: number;
  /**
   * Once the status has arrived, how long the body may take to be read for
   * the history (it never turns a 2xx into a failure). @defaultValue `1_000`
   */
  bodyTimeoutMs?: number;
  /** Stamps `webhook-timestamp` and measures latency. @defaultValue the system clock */
  clock?: Clock;
  /** Aborts the attempt (the worker is closing). */
  signal?: AbortSignal;
  /** @defaultValue `'requeue-webhooks/0.1'` */
  userAgent?: string;
  /** Bytes of the response body kept for the history. @defaultValue `512` */
  maxBodyBytes?: number;
  /** A guard built once and reused; otherwise one is built from `allowPrivate`/`allowHosts`. */
  guard?: SsrfGuard;
  /**
   * Keep-alive agents to reuse connections. They must not be shared with
   * requests made under other SSRF options: a pooled socket is not looked up
   * again. @defaultValue a fresh connection per attempt
   */
  agents?: { http?: HttpAgent; https?: HttpsAgent };
  /** Called once per attempt, success or not, before the promise settles. */
  onAttempt?: (details: DeliveryDetails) => void;
  /**
   * Header names whose values are credentials (besides names that look
   * secret): scrubbed from everything taken from the answer.
   * @defaultValue `defaultSecretHeaders`
   */
  secretHeaders?: readonly string[];
}

/** The user agent sent unless the job or the options give one. */
export const defaultUserAgent = 'requeue-webhooks/0.1';

/** The first `maxBytes` bytes of `text`. */
function firstBytes(text: string, maxBytes: number): string {
  return Buffer.byteLength(text) <= maxBytes
    ? text
    : Buffer.from(text).subarray(0, maxBytes).toString('utf8');
}

/** The one-line start of a body, for an error message. */
function excerpt(body: string, max = 120): string {
  const line = body.replace(/\s+/g, ' ').trim();
  return line.length <= max ? line : `${line.slice(0, max - 1)}…`;
}

function headerText(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Wraps what `send` rejected with into the error the classifier should see. */
function attemptError(err: unknown, target: string, latencyMs: number): unknown {
  if (err instanceof WebhookDeliveryError || isPermanentError(err)) return err;
  const code = (err as { code?: unknown } | null)?.code;
  return new WebhookDeliveryError(
    `POST ${target} failed: ${(err as Error)?.message ?? String(err)}`,
    {
      latencyMs,
      cause: err,
      ...(typeof code === 'string' ? { code } : {}),
    },
  );
}

/**
 * Delivers one webhook: POSTs {@link webhookBody} as JSON with the
 * Standard Webhooks headers (`webhook-id` = the event id,
 * `webhook-timestamp` = this attempt's time, `webhook-signature` when the
 * endpoint has a secret) and judges the answer:
 *
 * - 2xx: success; resolves with the status, latency and body start.
 * - 3xx: a failure, retried ({@link RetryableError}): redirects are not
 *   followed (they would bypass the SSRF guard and double the load), and a
 *   redirect may be temporary, e.g. during a receiver's maintenance.
 * - 4xx/5xx: rejects with a {@link WebhookDeliveryError} carrying `status` and
 *   `retry-after`; the classifier retries 408, 429 and 5xx (honouring
 *   Retry-After), files 410 as `gone` and dead-letters other 4xx.
 * - No answer (timeout, reset, refused): rejects with a
 *   {@link WebhookDeliveryError} carrying the `code`, which is retried.
 * - A destination the SSRF guard refuses: rejects with a
 *   {@link PermanentError} before any byte is sent.
 *
 * Neither the secret nor the signature is ever put in an error or a detail.
 */
export async function deliverWebhook(
  job: WebhookDelivery,
  options: DeliverOptions = {},
): Promise<DeliveryResult> {
  const {
    timeoutMs = 15_000,
    bodyTimeoutMs = 1_000,
    clock = systemClock,
    userAgent = defaultUserAgent,
    maxBodyBytes = 512,
    signal,
  } = options;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
    throw new RangeError(`deliver.timeoutMs must be a positive number of ms, got ${timeoutMs}`);
  }
  if (!Number.isInteger(maxBodyBytes) || maxBodyBytes < 0) {
    throw new RangeError(`deliver.maxBodyBytes must be an integer ≥ 0, got ${maxBodyBytes}`);
  }
  let url: URL;
  try {
    url = new URL(job.endpoint.url);
  } catch {
    throw new PermanentError(`endpoint "${job.endpoint.id}": url is not a valid URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new PermanentError(
      `endpoint "${job.endpoint.id}": url must be http: or https:, got ${url.protocol}`,
    );
  }
  const target = url.origin;
  const guard = options.guard ?? createSsrfGuard(options);
  const host = url.hostname.replace(/^\[|\]$/g, '');

  const startedAt = clock.now();
  const body = webhookBody(job.event, startedAt);
  const timestampSec = Math.floor(startedAt / 1000);
  const secret = job.endpoint.secret;
  const hasSecret = secret !== undefined && (typeof secret === 'string' || secret.length > 0);
  const signed: Record<string, string> = hasSecret
    ? { ...signWebhook(secret, job.event.id, timestampSec, body) }
    : { [webhookHeaders.id]: job.event.id, [webhookHeaders.timestamp]: String(timestampSec) };
  const headers = requestHeaders(job, body, signed, userAgent);
  // What a receiver echoing the request must not get into the history, the logs or an error.
  const sent = collectSentSecrets({
    url,
    headers,
    secret,
    ...(options.secretHeaders ? { secretHeaders: options.secretHeaders } : {}),
  });

  const agent = url.protocol === 'https:' ? options.agents?.https : options.agents?.http;
  let response: RawResponse;
  try {
    // Node connects to an IP literal without a lookup: check it here.
    if (isIP(host) !== 0) guard.check(host, host);
    response = await send({
      url,
      target,
      body,
      timeoutMs,
      // Read past the limit by the longest secret: none is cut in half before it is scrubbed.
      maxBodyBytes: maxBodyBytes + sent.longest,
      bodyTimeoutMs,
      signal,
      startedAt,
      clock,
      options: {
        method: 'POST',
        protocol: url.protocol,
        hostname: host,
        port: url.port === '' ? undefined : Number(url.port),
        path: `${url.pathname}${url.search}`,
        headers,
        lookup: guard.lookup,
        agent: agent ?? false,
        ...(url.protocol === 'https:' && job.endpoint.ca !== undefined && { ca: job.endpoint.ca }),
        ...(url.username || url.password
          ? { auth: `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}` }
          : {}),
      },
    });
  } catch (err) {
    const latencyMs = clock.now() - startedAt;
    const error = attemptError(err, target, latencyMs);
    const code = (error as { code?: unknown }).code;
    options.onAttempt?.({ latencyMs, ...(typeof code === 'string' ? { code } : {}) });
    throw sent.scrubError(error);
  }

  const latencyMs = clock.now() - startedAt;
  const { status } = response;
  const text = firstBytes(sent.scrub(response.body.toString('utf8')), maxBodyBytes);
  options.onAttempt?.({ status, latencyMs, body: text });
  if (status >= 200 && status < 300) return { status, latencyMs, body: text };

  const retryAfter = headerText(response.headers, 'retry-after');
  const answerHeaders: Record<string, string> =
    retryAfter === undefined ? {} : { 'retry-after': sent.scrub(retryAfter) };
  const answered = `POST ${target} answered ${status} ${STATUS_CODES[status] ?? ''}`.trimEnd();
  const failure = new WebhookDeliveryError(
    text === '' ? answered : `${answered}: ${excerpt(text)}`,
    {
      status,
      headers: answerHeaders,
      latencyMs,
      body: text,
    },
  );
  if (status >= 300 && status < 400) {
    throw Object.assign(
      new RetryableError(`${answered}; redirects are not followed: update the endpoint's URL`, {
        cause: failure,
      }),
      { status, headers: answerHeaders },
    );
  }
  throw failure;
}
