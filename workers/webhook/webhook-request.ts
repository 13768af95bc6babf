/**
 * The request a delivery sends: Standard Webhooks' body and the headers a
 * job may add to the signed ones.
 *
 * @see https://www.standardwebhooks.com/
 */
import type { WebhookDelivery } from './delivery-types.js';

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

export function requestHeaders(
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
