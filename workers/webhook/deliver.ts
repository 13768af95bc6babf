/**
 * One delivery attempt of a webhook: a signed JSON POST over node:http(s)
 * through the SSRF guard, judged the way Standard Webhooks asks a sender to
 * judge the answer.
 *
 * @see https://www.standardwebhooks.com/ ("Delivery success and failure")
 */
import {
  STATUS_CODES,
  request as httpRequest,
  type Agent as HttpAgent,
  type ClientRequest,
  type IncomingHttpHeaders,
  type RequestOptions,
} from 'node:http';
import { request as httpsRequest, type Agent as HttpsAgent } from 'node:https';
import { isIP } from 'node:net';
import { isPermanentError, PermanentError } from '../../src/errors/permanent-error.js';
import { RetryableError } from '../../src/errors/retryable-error.js';
import { systemClock, type Clock } from '../../src/util/system.js';
import { collectSentSecrets } from './sent-secrets.js';
import { signWebhook, webhookHeaders, type WebhookSecret } from './signature.js';
import { createSsrfGuard, type SsrfGuard, type SsrfOptions } from './ssrf.js';

/** What a delivery needs from a webhook job (see `webhookJobSchema` in `worker.ts`). */
export interface WebhookDelivery {
  endpoint: {
    id: string;
    /** An `http:` or `https:` URL. */
    url: string;
    /** Signs the request; several sign it during a rotation; none sends it unsigned. */
    secret?: WebhookSecret | undefined;
  };
  event: {
    /** Sent as `webhook-id`: the receiver's idempotency key, the same on every attempt. */
    id: string;
    /** `type` of the body, e.g. `invoice.paid`. */
    type: string;
    /** When the event happened, ISO 8601; the attempt's time when absent. */
    timestamp?: string | undefined;
    /** `data` of the body. */
    payload: unknown;
  };
  /** Extra request headers. They never replace `webhook-*`, `content-type` or framing headers. */
  headers?: Readonly<Record<string, string>> | undefined;
}

/** What one attempt saw, for the job's history (`job.annotate`). */
export interface DeliveryDetails {
  /** The response status, when a response came. */
  status?: number;
  /** From the start of the attempt to the end of the (bounded) response body, in ms. */
  latencyMs: number;
  /** The first `maxBodyBytes` of the response body, as UTF-8 (secret and signatures blanked). */
  body?: string;
  /** The error code when no response came (`ETIMEDOUT`, `ECONNREFUSED`, …). */
  code?: string;
}

/** A successful (2xx) delivery. */
export interface DeliveryResult {
  status: number;
  latencyMs: number;
  body: string;
}

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

/**
 * A delivery that failed: a non-2xx answer (with `status` and the
 * `retry-after` header, which the classifier reads), a timeout or a network
 * error (with `code`). Messages name the endpoint by origin only: a URL's
 * path and query often carry a token.
 */
export class WebhookDeliveryError extends Error {
  override name = 'WebhookDeliveryError';
  readonly status?: number;
  readonly headers?: Readonly<Record<string, string>>;
  readonly code?: string;
  readonly latencyMs: number;
  readonly body?: string;

  constructor(
    message: string,
    details: DeliveryDetails & { headers?: Record<string, string>; cause?: unknown },
  ) {
    super(message, 'cause' in details ? { cause: details.cause } : undefined);
    this.latencyMs = details.latencyMs;
    if (details.status !== undefined) this.status = details.status;
    if (details.headers !== undefined) this.headers = details.headers;
    if (details.code !== undefined) this.code = details.code;
    if (details.body !== undefined) this.body = details.body;
  }
}

/**
 * The request body: Standard Webhooks' recommended payload
 * `{"type", "timestamp", "data"}`, minified. The event id is not repeated
 * in it: it travels as `webhook-id`. `timestamp` is when the event
 * happened, so the body is the same on every attempt when the event has one
 * (`enqueueWebhook` stamps it).
 */
export function webhookBody(event: WebhookDelivery['event'], now: number): string {
  return JSON.stringify({
    type: event.type,
    timestamp: event.timestamp ?? new Date(now).toISOString(),
    data: event.payload ?? null,
  });
}

/** Headers a job cannot set: the signature's, and those that frame the body. */
const RESERVED_HEADERS: ReadonlySet<string> = new Set([
  'content-type',
  'content-length',
  'transfer-encoding',
  'host',
  'connection',
  'keep-alive',
  'upgrade',
  'te',
  'trailer',
  'expect',
]);

function requestHeaders(
  job: WebhookDelivery,
  body: string,
  signed: Record<string, string>,
  userAgent: string,
): Record<string, string> {
  const headers: Record<string, string> = { 'user-agent': userAgent };
  for (const [name, value] of Object.entries(job.headers ?? {})) {
    const key = name.toLowerCase();
    if (!key.startsWith('webhook-') && !RESERVED_HEADERS.has(key)) headers[key] = value;
  }
  // Into the fresh object rather than a spread copy, which costs microseconds on Node 20.
  headers['content-type'] = 'application/json';
  headers['content-length'] = String(Buffer.byteLength(body));
  return Object.assign(headers, signed);
}

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

interface RawResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

interface SendInput {
  url: URL;
  target: string;
  options: RequestOptions;
  body: string;
  timeoutMs: number;
  maxBodyBytes: number;
  /** How long the body may take once the status has arrived. */
  bodyTimeoutMs: number;
  signal: AbortSignal | undefined;
  startedAt: number;
  clock: Clock;
}

/** Sends the request; resolves with any HTTP answer, rejects when none came. */
function send(input: SendInput): Promise<RawResponse> {
  const { url, target, timeoutMs, maxBodyBytes, signal } = input;
  const elapsed = (): number => input.clock.now() - input.startedAt;
  return new Promise<RawResponse>((resolve, reject) => {
    let req: ClientRequest | undefined;
    let settled = false;
    const settle = (outcome: () => void): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      outcome();
    };
    const fail = (err: unknown): void =>
      settle(() => {
        req?.destroy();
        reject(err);
      });
    const timer = setTimeout(() => {
      fail(
        new WebhookDeliveryError(`POST ${target} timed out after ${timeoutMs} ms`, {
          code: 'ETIMEDOUT',
          latencyMs: elapsed(),
        }),
      );
    }, timeoutMs);
    timer.unref();
    const onAbort = (): void => {
      fail(
        new WebhookDeliveryError(`POST ${target} aborted: the worker is shutting down`, {
          code: 'ECONNABORTED',
          latencyMs: elapsed(),
          cause: signal?.reason,
        }),
      );
    };
    if (signal?.aborted) {
      onAbort();
      return;
    }
    signal?.addEventListener('abort', onAbort, { once: true });

    try {
      req = (url.protocol === 'https:' ? httpsRequest : httpRequest)(input.options);
    } catch (err) {
      // An option Node refuses (a header value, say) will be refused on every attempt.
      fail(
        new PermanentError(`cannot build the request to ${target}: ${(err as Error).message}`, {
          cause: err,
        }),
      );
      return;
    }
    req.on('error', fail);
    req.on('response', (res) => {
      // The status line and headers decide the attempt: from here on nothing
      // turns it into a failure. The body is read for the history only, up to
      // its byte limit and within its own short deadline.
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      const chunks: Buffer[] = [];
      let size = 0;
      const done = (): void => {
        clearTimeout(bodyTimer);
        settle(() =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).subarray(0, maxBodyBytes),
          }),
        );
        res.destroy();
      };
      const bodyTimer = setTimeout(done, input.bodyTimeoutMs);
      bodyTimer.unref();
      res.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        size += chunk.length;
        // Enough for the history; the rest is not worth the wait or the memory.
        if (size >= maxBodyBytes) done();
      });
      res.on('end', done);
      res.on('error', done);
      res.on('close', done);
    });
    req.end(input.body);
  });
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
