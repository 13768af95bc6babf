import { readProperty } from './describe-error.js';

/**
 * Largest delta-seconds kept. RFC 9111 §1.2.2 says a value too large to
 * represent is read as 2^31 seconds rather than as garbage: a server that
 * says "much later" still means "not now". The classifier's cap then applies.
 */
const MAX_DELTA_SECONDS = 2 ** 31;

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const MON = `(?<mon>${MONTHS.join('|')})`;
const TIME = String.raw`(?<h>\d{2}):(?<m>\d{2}):(?<s>\d{2})`;

/**
 * The three HTTP-date forms of RFC 9110 §5.6.7, matched exactly (case aside)
 * rather than handed to Date.parse, which accepts bare numbers and reads
 * asctime, which names no zone, as local time. Day names are not checked.
 */
const HTTP_DATES = [
  // IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`
  String.raw`[a-z]{3}, (?<d>\d{2}) ${MON} (?<y>\d{4}) ${TIME} GMT`,
  // RFC 850: `Sunday, 06-Nov-94 08:49:37 GMT`
  String.raw`[a-z]{6,9}, (?<d>\d{2})-${MON}-(?<y>\d{2}) ${TIME} GMT`,
  // asctime: `Sun Nov  6 08:49:37 1994`
  String.raw`[a-z]{3} ${MON} (?<d>[ \d]\d) ${TIME} (?<y>\d{4})`,
].map((source) => new RegExp(`^${source}$`, 'i'));

/** Parses an HTTP-date to epoch ms, or `undefined`. */
function parseHttpDate(text: string, now: number): number | undefined {
  for (const format of HTTP_DATES) {
    const groups = format.exec(text)?.groups;
    if (!groups) continue;
    const day = Number(groups.d);
    const [hour, minute, second] = [Number(groups.h), Number(groups.m), Number(groups.s)];
    const month = MONTHS.indexOf((groups.mon ?? '').toLowerCase());
    let year = Number(groups.y);
    if (groups.y?.length === 2) {
      // RFC 850's two-digit year: RFC 9110 §5.6.7 reads one more than 50
      // years ahead as the most recent past year with those digits.
      const thisYear = new Date(now).getUTCFullYear();
      year += thisYear - (thisYear % 100);
      if (year > thisYear + 50) year -= 100;
    }
    const daysInMonth = new Date(Date.UTC(year, month + 1, 0)).getUTCDate();
    // Second 60 is a leap second; Date.UTC rolls it into the next minute.
    if (day < 1 || day > daysInMonth || hour > 23 || minute > 59 || second > 60) return undefined;
    return Date.UTC(year, month, day, hour, minute, second);
  }
  return undefined;
}

/**
 * Parses a `Retry-After` value into ms from `now`, or `undefined` for
 * anything that is not one. Never throws.
 *
 * - delta-seconds: a non-negative integer, as a string (surrounding
 *   whitespace allowed) or a number. `'1.5'`, `'-1'`, `'+1'` and `''` are
 *   garbage. Values above 2^31 seconds are clamped to 2^31 (RFC 9111 §1.2.2).
 * - HTTP-date: IMF-fixdate, or the obsolete RFC 850 and asctime forms, all
 *   read as UTC. A date in the past gives 0.
 *
 * @param now - the current time, epoch ms.
 * @see https://www.rfc-editor.org/rfc/rfc9110#section-10.2.3
 */
export function parseRetryAfter(value: unknown, now: number): number | undefined {
  if (typeof value === 'number') {
    if (!Number.isInteger(value) || value < 0) return undefined;
    return Math.min(value, MAX_DELTA_SECONDS) * 1000;
  }
  if (typeof value !== 'string') return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Math.min(Number(text), MAX_DELTA_SECONDS) * 1000;
  if (!Number.isFinite(now)) return undefined;
  const at = parseHttpDate(text, now);
  return at === undefined ? undefined : Math.max(0, at - now);
}

/** The first value of a header that may repeat. */
function first(value: unknown): unknown {
  return Array.isArray(value) ? (value as unknown[])[0] : value;
}

/** `retry-after` from one headers container, matching the name case-insensitively. */
function lookup(headers: unknown): unknown {
  if (typeof headers !== 'object' || headers === null) return undefined;
  if (headers instanceof Map) {
    for (const [key, value] of headers) {
      if (typeof key === 'string' && key.toLowerCase() === 'retry-after') return first(value);
    }
    return undefined;
  }
  const get = readProperty(headers, 'get');
  if (typeof get === 'function') {
    // WHATWG Headers and axios's AxiosHeaders: get() is case-insensitive and
    // returns null when absent.
    return first((get as (name: string) => unknown).call(headers, 'retry-after') ?? undefined);
  }
  const key = Object.keys(headers).find((k) => k.toLowerCase() === 'retry-after');
  return key === undefined ? undefined : first(readProperty(headers, key));
}

/**
 * The raw `Retry-After` value carried by an error, from `err.headers` or else
 * `err.response.headers`: a WHATWG `Headers`, a `Map` or a plain object,
 * whose value may be a string, a number or an array (the first is taken).
 * `undefined` when there is none. Never throws; pass the result to
 * {@link parseRetryAfter}.
 */
export function readRetryAfterHeader(err: unknown): unknown {
  try {
    return (
      lookup(readProperty(err, 'headers')) ??
      lookup(readProperty(readProperty(err, 'response'), 'headers'))
    );
  } catch {
    // A hostile get() or Proxy: no usable header.
    return undefined;
  }
}
