/**
 * What one delivery sent as a credential, and the one scrubber for anything
 * taken from the receiver's answer (body, headers, error messages) before it
 * is stored, logged or thrown. A receiver that echoes the request back —
 * many do on a 4xx/5xx — would otherwise put requeue's own credentials into
 * the history, the DLQ, every view and the logs, in forms the pattern-based
 * redaction of `src/util/redact.ts` cannot see (a path with its query, a
 * JSON-escaped header, a URL-encoded token). Here the exact values are known,
 * so each is blanked wherever it appears, in its common encodings.
 */
import { censor, defaultSecretHeaders, isSecretKey, isSecretParam } from '../../src/util/redact.js';
import type { WebhookSecret } from './signature.js';

/** Values shorter than this are not scrubbed: blanking them would blank ordinary text. */
const minLength = 4;

/** What a delivery sends that may carry credentials. */
export interface SentRequest {
  /** The endpoint's URL as given (userinfo and query included). */
  url: URL;
  /** The request headers as sent, the signature's included. */
  headers: Readonly<Record<string, string>>;
  /** The signing secret(s). */
  secret: WebhookSecret | undefined;
  /** Header names whose values are secret, besides the names that look secret. @defaultValue {@link defaultSecretHeaders} */
  secretHeaders?: readonly string[];
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return text;
  }
}

/** `Basic <base64>` → the decoded `user:pass` and the password; else nothing. */
function basicParts(credential: string): string[] {
  const pair = Buffer.from(credential, 'base64').toString('utf8');
  const colon = pair.indexOf(':');
  return colon < 0 ? [] : [pair, pair.slice(colon + 1)];
}

/** The credential values of one secret header: the whole value and the parts an echo may show. */
function headerValues(name: string, value: string): string[] {
  const out = [value];
  const auth = /^(\S+)\s+(\S+)\s*$/.exec(value);
  if (auth) {
    out.push(auth[2]!);
    if (auth[1]!.toLowerCase() === 'basic') out.push(...basicParts(auth[2]!));
  }
  if (name === 'cookie') {
    for (const pair of value.split(';')) {
      const eq = pair.indexOf('=');
      if (eq > 0) out.push(pair.slice(eq + 1).trim());
    }
  }
  if (name === 'webhook-signature') {
    for (const signature of value.split(' ')) out.push(signature, signature.replace(/^v1,/, ''));
  }
  return out;
}

/** The credential values of a URL: userinfo (and the Basic header Node makes of it), token-like query values. */
function urlValues(url: URL): string[] {
  const out: string[] = [];
  const user = safeDecode(url.username);
  const password = safeDecode(url.password);
  if (url.password) {
    out.push(url.password, password);
    out.push(Buffer.from(`${user}:${password}`).toString('base64'), `${user}:${password}`);
  } else if (url.username) {
    out.push(url.username, user, Buffer.from(`${user}:`).toString('base64'));
  }
  for (const part of url.search.replace(/^\?/, '').split('&')) {
    const eq = part.indexOf('=');
    if (eq <= 0) continue;
    const name = safeDecode(part.slice(0, eq));
    if (isSecretParam(name)) out.push(part.slice(eq + 1), safeDecode(part.slice(eq + 1)));
  }
  return out;
}

/** The forms a value takes in an echo: as is, JSON-escaped (once, twice), URL- and form-encoded, base64. */
function encodings(value: string): string[] {
  const json = JSON.stringify(value).slice(1, -1);
  const url = encodeURIComponent(value);
  return [
    value,
    json,
    JSON.stringify(json).slice(1, -1),
    url,
    url.replace(/%20/g, '+'),
    Buffer.from(value).toString('base64'),
  ];
}

/**
 * The secrets one delivery sent, in every form to look for. Build it once per
 * attempt with {@link collectSentSecrets}; pass every text from the answer
 * through {@link SentSecrets.scrub}.
 */
export class SentSecrets {
  /** Longest first: a value that contains another is blanked whole. */
  readonly #needles: readonly string[];

  constructor(values: Iterable<string>) {
    const needles = new Set<string>();
    for (const value of values) {
      if (value.length < minLength) continue;
      for (const form of encodings(value)) if (form.length >= minLength) needles.add(form);
    }
    this.#needles = [...needles].sort((a, b) => b.length - a.length);
  }

  /** How many more bytes than kept to read, so that no secret straddles the cut. */
  get longest(): number {
    return Buffer.byteLength(this.#needles[0] ?? '');
  }

  /** `text` with every sent secret, in any of its forms, blanked. */
  scrub(text: string): string {
    let out = text;
    for (const needle of this.#needles)
      if (out.includes(needle)) out = out.split(needle).join(censor);
    return out;
  }

  /** The error (and its causes) with message, stack and body scrubbed, in place; returned. */
  scrubError<E>(err: E, depth = 0): E {
    if (!(err instanceof Error) || depth > 4) return err;
    err.message = this.scrub(err.message);
    if (err.stack !== undefined) err.stack = this.scrub(err.stack);
    const body = (err as { body?: unknown }).body;
    if (typeof body === 'string') Object.assign(err, { body: this.scrub(body) });
    this.scrubError(err.cause, depth + 1);
    return err;
  }
}

/**
 * Everything a delivery sends as a credential: the values of secret headers
 * (named in `secretHeaders` or looking secret: `…token`, `…key`, `cookie`…;
 * a Bearer's token, a Basic pair decoded, each cookie's value), the URL's
 * userinfo (and the Basic header made of it), token-like query values
 * (`?token=`, `?sig=`…), the signing secrets and the signatures.
 */
export function collectSentSecrets(request: SentRequest): SentSecrets {
  const secretHeaders = (request.secretHeaders ?? defaultSecretHeaders).map((h) => h.toLowerCase());
  const values: string[] = [];
  for (const [name, value] of Object.entries(request.headers)) {
    const key = name.toLowerCase();
    if (key === 'webhook-signature' || isSecretKey(key, secretHeaders))
      values.push(...headerValues(key, value));
  }
  values.push(...urlValues(request.url));
  const secrets = request.secret === undefined ? [] : [request.secret].flat();
  for (const secret of secrets) values.push(secret, secret.replace(/^whsec_/, ''));
  return new SentSecrets(values);
}
