/**
 * Standard Webhooks signatures (symmetric `v1`, HMAC-SHA256), both sides:
 * the sender's headers and the receiver's verification. The HMAC is the
 * official `standardwebhooks` package's; this module adds what it leaves
 * out: strict secret checks whose errors never quote the secret, several
 * secrets during a rotation, and a receiver's clock and tolerance.
 *
 * @see https://www.standardwebhooks.com/ (spec 1.0.0, "Signature scheme",
 *   "Webhook headers", "Verifying signatures")
 */
import { timingSafeEqual } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { systemClock } from '../../src/util/system.js';
import {
  decodeSecret,
  secretBytes,
  secretPrefix,
  secretProblem,
} from '../../src/policy/webhook-secret.js';

// Moved to src/policy so endpoint records validate secrets; still exported from here.
export { decodeSecret, secretBytes, secretPrefix, secretProblem };

/** The headers a signed webhook carries, lower-case as Node reports them. */
export const webhookHeaders = {
  id: 'webhook-id',
  timestamp: 'webhook-timestamp',
  signature: 'webhook-signature',
} as const;

/** One secret, or several while a secret is being rotated (each one signs). */
export type WebhookSecret = string | readonly string[];

/**
 * The three Standard Webhooks headers of one attempt. A type rather than an
 * interface so it can be passed wherever a header record is expected.
 */
export type SignedHeaders = {
  'webhook-id': string;
  'webhook-timestamp': string;
  /** Space-separated `v1,<base64>` signatures, one per secret. */
  'webhook-signature': string;
};

function secretList(secrets: WebhookSecret): readonly string[] {
  return typeof secrets === 'string' ? [secrets] : secrets;
}

/**
 * One `v1,<base64>` signature by the official library. The key is decoded
 * here (strictly, with errors that never quote it) and handed over raw. A
 * `Buffer` body is signed as its UTF-8 text, as the library does (webhook
 * bodies are JSON).
 */
function sign(secret: string, id: string, timestampSec: number, body: string | Buffer): string {
  const webhook = new Webhook(decodeSecret(secret), { format: 'raw' });
  return webhook.sign(id, new Date(timestampSec * 1000), body);
}

/**
 * The `webhook-signature` value: `v1,<base64 HMAC-SHA256>` per secret,
 * space-separated, so receivers holding either the old or the new secret
 * accept the message during a rotation.
 */
export function signatureHeader(
  secrets: WebhookSecret,
  id: string,
  timestampSec: number,
  body: string | Buffer,
): string {
  const list = secretList(secrets);
  if (list.length === 0) throw new TypeError('at least one webhook secret is needed to sign');
  return list.map((secret) => sign(secret, id, timestampSec, body)).join(' ');
}

/** The three headers of one signed attempt; `timestampSec` is the attempt's time. */
export function signWebhook(
  secrets: WebhookSecret,
  id: string,
  timestampSec: number,
  body: string | Buffer,
): SignedHeaders {
  if (!Number.isSafeInteger(timestampSec) || timestampSec < 0) {
    throw new RangeError(`timestampSec must be a whole number of seconds, got ${timestampSec}`);
  }
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestampSec),
    'webhook-signature': signatureHeader(secrets, id, timestampSec, body),
  };
}

/** Why a received webhook was refused. The message never quotes a secret or a signature. */
export class WebhookVerificationError extends Error {
  override name = 'WebhookVerificationError';
}

/** Headers as a receiver has them: Node's `IncomingHttpHeaders`, a WHATWG `Headers`, a record. */
export type ReceivedHeaders =
  | { get(name: string): string | null }
  | Readonly<Record<string, string | readonly string[] | undefined>>;

function header(headers: ReceivedHeaders, name: string): string | undefined {
  if (typeof (headers as { get?: unknown }).get === 'function') {
    return (headers as { get(name: string): string | null }).get(name) ?? undefined;
  }
  const record = headers as Readonly<Record<string, string | readonly string[] | undefined>>;
  const key = Object.keys(record).find((k) => k.toLowerCase() === name);
  const value = key === undefined ? undefined : record[key];
  return typeof value === 'string' ? value : value?.[0];
}

/** Options of {@link verifyWebhook}. */
export interface VerifyOptions {
  /** The receiver's time, ms since the epoch. @defaultValue the system clock */
  now?: number;
  /**
   * Largest difference allowed between `webhook-timestamp` and `now`,
   * either way, in seconds. @defaultValue `300`
   */
  toleranceSec?: number;
}

/**
 * Verifies a received webhook as the spec asks a receiver to: the
 * timestamp is within `toleranceSec` of `now` in both directions (replays
 * and clock games), and at least one `v1` signature in the header matches
 * one of `secrets`, compared in constant time. Other schemes (`v1a`) are
 * skipped. `body` must be the raw bytes received, not re-serialised JSON.
 *
 * @throws WebhookVerificationError saying which check failed.
 */
export function verifyWebhook(
  secrets: WebhookSecret,
  headers: ReceivedHeaders,
  body: string | Buffer,
  { now = systemClock.now(), toleranceSec = 300 }: VerifyOptions = {},
): void {
  const id = header(headers, webhookHeaders.id);
  const timestamp = header(headers, webhookHeaders.timestamp);
  const signatures = header(headers, webhookHeaders.signature);
  if (!id || !timestamp || !signatures) {
    const missing = Object.values(webhookHeaders).filter((name) => !header(headers, name));
    throw new WebhookVerificationError(`missing header: ${missing.join(', ')}`);
  }
  if (!/^\d{1,15}$/.test(timestamp)) {
    throw new WebhookVerificationError('webhook-timestamp is not a whole number of seconds');
  }
  const nowSec = Math.floor(now / 1000);
  const sentSec = Number(timestamp);
  if (nowSec - sentSec > toleranceSec) {
    throw new WebhookVerificationError(
      `webhook-timestamp is ${nowSec - sentSec} s old (tolerance ${toleranceSec} s)`,
    );
  }
  if (sentSec - nowSec > toleranceSec) {
    throw new WebhookVerificationError(
      `webhook-timestamp is ${sentSec - nowSec} s in the future (tolerance ${toleranceSec} s)`,
    );
  }

  // The library's own verify() checks the timestamp against Date.now() with a
  // fixed 5 minutes and parses the body as JSON; the receiver's clock and
  // tolerance are checked above, so only its signing is used here.
  const expected = secretList(secrets).map((secret) =>
    Buffer.from(sign(secret, id, sentSec, body).slice('v1,'.length), 'base64'),
  );
  for (const entry of signatures.split(' ')) {
    const comma = entry.indexOf(',');
    if (comma < 0 || entry.slice(0, comma) !== 'v1') continue;
    const given = Buffer.from(entry.slice(comma + 1), 'base64');
    for (const mac of expected) {
      // timingSafeEqual throws on a length mismatch; a wrong length is simply no match.
      if (given.length === mac.length && timingSafeEqual(given, mac)) return;
    }
  }
  throw new WebhookVerificationError('no webhook-signature matches');
}
