/**
 * The one place that decides what a secret looks like and blanks it for
 * showing: log lines (through pino's `redact` and error serializer), error
 * messages, CLI tables and `--json`, DLQ views. What is stored for delivery
 * and replay is never touched: these functions return copies.
 */

/** What a blanked value reads as. */
export const censor = '[redacted]';

/** What a blanked part of a URL (password, username, query value) reads as. */
export const urlCensor = '***';

/**
 * Headers whose values are never shown, matched case-insensitively.
 * @defaultValue `Authorization`, `Cookie`, `Set-Cookie`, `Proxy-Authorization`, `X-Api-Key`
 */
export const defaultSecretHeaders: readonly string[] = Object.freeze([
  'authorization',
  'cookie',
  'set-cookie',
  'proxy-authorization',
  'x-api-key',
]);

/** Options of {@link redactValue}. */
export interface RedactOptions {
  /** Header names (any case) whose values are blanked. @defaultValue {@link defaultSecretHeaders} */
  headers?: readonly string[];
}

/**
 * Keys whose values are secrets wherever they appear: webhook secrets,
 * intake tokens, passwords, API keys, cookies. Matched at the end of the key,
 * so `accessToken` and `webhookSecret` are caught and `tokens` (a budget's
 * count) or `idempotencyKey` are not.
 */
const secretKey =
  /(?:secrets?|password|passwd|pwd|token|api[-_]?key|credentials?|authorization|cookie|signature)$/i;

/** Query parameters that carry credentials: `?token=`, `?key=`, `?password=`, `?sig=`, `X-Amz-Signature`… */
const secretParam = /token|key|secret|pass|pwd|sig|auth|credential|session|jwt/i;

/** Whether a query parameter's name says it carries a credential (`token`, `sig`, `api_key`…). */
export function isSecretParam(name: string): boolean {
  return secretParam.test(name);
}

/** URLs inside free text (an error message, a log line). */
const urlInText = /\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>`]+/gi;

/** `Bearer abc`, `Basic abc` in free text (an echoed header). */
const credentialsInText = /\b(Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=-]{4,}/gi;

/** Redis commands whose arguments hold credentials (ioredis errors carry them). */
const credentialCommand = /^(auth|hello|migrate|acl|config)$/i;

/** Whether a key (an object's or a header's) names a secret. */
export function isSecretKey(
  key: string,
  headers: readonly string[] = defaultSecretHeaders,
): boolean {
  return secretKey.test(key) || headers.includes(key.toLowerCase());
}

/**
 * A URL with its userinfo and credential-looking query values blanked:
 * `https://ada:pw@x.io/h?token=t&a=1` → `https://ada:***@x.io/h?token=***&a=1`.
 * A username without a password is blanked too (it is often a token). Text
 * that is not a URL comes back as it was.
 */
export function redactUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return text;
  }
  let changed = false;
  if (url.password) {
    url.password = urlCensor;
    changed = true;
  } else if (url.username) {
    url.username = urlCensor;
    changed = true;
  }
  for (const [name] of [...url.searchParams]) {
    if (secretParam.test(name)) {
      url.searchParams.set(name, urlCensor);
      changed = true;
    }
  }
  return changed ? url.toString().replaceAll('%2A%2A%2A', urlCensor) : text;
}

/**
 * Free text with the URLs in it redacted ({@link redactUrl}), `Bearer …`
 * credentials blanked, and each of `known` (secrets the caller holds, e.g.
 * the intake token) replaced wherever it appears.
 */
export function redactText(text: string, known: readonly string[] = []): string {
  let out = text.replace(urlInText, (url) => {
    // A sentence's closing punctuation is not part of the URL.
    const trail = /[.,;:)\]]+$/.exec(url)?.[0] ?? '';
    return redactUrl(url.slice(0, url.length - trail.length)) + trail;
  });
  out = out.replace(credentialsInText, (_m, scheme: string) => `${scheme} ${censor}`);
  for (const secret of known) if (secret.length >= 4) out = out.split(secret).join(censor);
  return out;
}

/**
 * A deep copy of `value` fit to show: values under secret keys and secret
 * headers blanked, URLs and free text redacted, errors serialised by
 * {@link redactError}. Cycles and depth beyond 64 end as `[…]`.
 */
export function redactValue(value: unknown, options: RedactOptions = {}): unknown {
  const headers = (options.headers ?? defaultSecretHeaders).map((h) => h.toLowerCase());
  const seen = new WeakSet<object>();
  const walk = (v: unknown, depth: number): unknown => {
    if (typeof v === 'string') return redactText(v);
    if (v === null || typeof v !== 'object') return v;
    if (depth > 64 || seen.has(v)) return '[…]';
    seen.add(v);
    try {
      if (v instanceof Error) return redactError(v, options);
      if (Array.isArray(v)) return v.map((item) => walk(item, depth + 1));
      const out: Record<string, unknown> = {};
      for (const [key, item] of Object.entries(v)) {
        out[key] =
          item !== undefined && item !== null && isSecretKey(key, headers)
            ? censor
            : walk(item, depth + 1);
      }
      return out;
    } finally {
      seen.delete(v);
    }
  };
  return walk(value, 0);
}

/** An error as a log line or a view shows it. */
export interface RedactedError {
  type: string;
  message: string;
  stack?: string;
  [key: string]: unknown;
}

/**
 * An error serialised for a log line with nothing secret in it: its message
 * and stack redacted ({@link redactText}), its own properties through
 * {@link redactValue}, a Redis client's failed `AUTH`/`HELLO` command with
 * its arguments blanked (ioredis puts the password there), and its `cause`
 * the same way. This is pino's `err` serializer.
 */
export function redactError(err: unknown, options: RedactOptions = {}): unknown {
  if (!(err instanceof Error)) return redactValue(err, options);
  const out: RedactedError = {
    type: err.constructor?.name ?? err.name,
    message: redactText(err.message),
  };
  if (err.stack !== undefined) out.stack = redactText(err.stack);
  for (const [key, value] of Object.entries(err)) {
    if (key === 'command' && value && typeof value === 'object') {
      const command = value as { name?: unknown; args?: unknown };
      out.command = {
        name: command.name,
        args:
          typeof command.name === 'string' && credentialCommand.test(command.name)
            ? [censor]
            : redactValue(command.args, options),
      };
      continue;
    }
    out[key] = isSecretKey(key, options.headers) ? censor : redactValue(value, options);
  }
  if (err.cause !== undefined && !('cause' in out)) out.cause = redactError(err.cause, options);
  return out;
}

/** Path segments pino blanks wherever they appear in the first levels of a log line. */
const secretPathKeys = ['secret', 'password', 'token', 'redisUrl', 'authorization', 'cookie'];

/**
 * pino `redact` paths for {@link secretPathKeys} up to three levels deep, the
 * `headers` on `headerList`, and the arguments of a failed Redis command.
 */
export function pinoRedactPaths(headerList: readonly string[] = defaultSecretHeaders): string[] {
  const paths: string[] = [];
  const prefixes = ['', '*.', '*.*.'];
  for (const prefix of prefixes) {
    for (const key of secretPathKeys) paths.push(`${prefix}${key}`);
    for (const header of [...headerList.map((h) => h.toLowerCase()), 'webhook-signature']) {
      paths.push(`${prefix}headers[${JSON.stringify(header)}]`);
    }
    paths.push(`${prefix}command.args`);
  }
  return paths;
}
