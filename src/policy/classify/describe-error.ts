import { redactText } from '../../util/redact.js';

/**
 * Safe inspection of thrown values. Anything can be thrown — a string, `null`,
 * a Proxy, an object whose getters throw — and the code that looks at it runs
 * while handling a failure, where a second exception would lose the first.
 */

/** A thrown value summarised for the attempt history. */
export interface ErrorDescription {
  /** The error's `name` (`TypeError`, `AbortError`), else `typeof` or `null`. */
  class: string;
  /** The message, or a JSON-ish rendering of a thrown non-error; truncated. */
  message: string;
  /** An HTTP status found on the error (see `readStatus` in `describe-error.ts`). */
  status?: number;
  /** A string `code` found on the error or its `cause` (see `readCode` in `describe-error.ts`). */
  code?: string;
}

/** Longest `class` kept; a name is an identifier, not a payload. */
const MAX_CLASS_LENGTH = 100;

/**
 * Reads `value[key]`, or `undefined` when `value` is not an object or the read
 * throws (a getter, a revoked Proxy).
 */
export function readProperty(value: unknown, key: string): unknown {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null)
    return undefined;
  try {
    return (value as Record<string, unknown>)[key];
  } catch {
    return undefined;
  }
}

/** An integer 100..599 from a number or a numeric string, else `undefined`. */
function asStatus(value: unknown): number | undefined {
  const n = typeof value === 'string' && /^\s*\d{3}\s*$/.test(value) ? Number(value) : value;
  return typeof n === 'number' && Number.isInteger(n) && n >= 100 && n <= 599 ? n : undefined;
}

/**
 * The HTTP status of an error: the first valid one of `err.status`,
 * `err.statusCode`, `err.response.status` and `err.response.statusCode`
 * (got's shape), as a number or numeric string in 100..599.
 */
export function readStatus(err: unknown): number | undefined {
  const response = readProperty(err, 'response');
  return (
    asStatus(readProperty(err, 'status')) ??
    asStatus(readProperty(err, 'statusCode')) ??
    asStatus(readProperty(response, 'status')) ??
    asStatus(readProperty(response, 'statusCode'))
  );
}

/**
 * The string `code`s of an error and of its `cause`, in that order: undici's
 * `fetch failed` carries the socket's code only on its `cause`.
 */
export function readCodes(err: unknown): string[] {
  return [readProperty(err, 'code'), readProperty(readProperty(err, 'cause'), 'code')].filter(
    (code): code is string => typeof code === 'string' && code !== '',
  );
}

/** The first of {@link readCodes}. */
export function readCode(err: unknown): string | undefined {
  return readCodes(err)[0];
}

/**
 * Cuts `text` to at most `max` characters, marking the cut with `…` and never
 * splitting a surrogate pair.
 */
function truncate(text: string, max: number): string {
  if (text.length <= max) return text;
  if (max < 1) return '';
  let end = max - 1;
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end -= 1;
  return `${text.slice(0, end)}…`;
}

/** `JSON.stringify` that survives cycles, BigInts and throwing getters. */
function jsonish(value: object): string {
  const seen = new WeakSet<object>();
  try {
    return (
      JSON.stringify(value, (_key, v: unknown) => {
        if (typeof v === 'bigint') return `${v}n`;
        if (typeof v === 'object' && v !== null) {
          if (seen.has(v)) return '[Circular]';
          seen.add(v);
        }
        return v;
      }) ?? ''
    );
  } catch {
    return '[unserialisable]';
  }
}

/** The class of an object: its `name`, else its constructor's, else `Object`. */
function className(err: object): string {
  const name = readProperty(err, 'name');
  if (typeof name === 'string' && name !== '') return name;
  const ctorName = readProperty(readProperty(err, 'constructor'), 'name');
  return typeof ctorName === 'string' && ctorName !== '' ? ctorName : 'Object';
}

/** Longest stack kept: the frames that say where, not a whole async chain. */
const MAX_STACK_LENGTH = 4_000;

/**
 * The `stack` of a thrown value, cut to {@link MAX_STACK_LENGTH} characters
 * and redacted as free text (URLs' credentials and secret parameters, `Bearer`
 * tokens) before it is stored, since tools outside requeue (bull-board) show
 * BullMQ's `stacktrace` as it is; `undefined` for a thrown string, a stack
 * that is not a string, or a getter that throws.
 */
export function stackOf(err: unknown): string | undefined {
  const stack = readProperty(err, 'stack');
  if (typeof stack !== 'string' || stack === '') return undefined;
  return redactText(truncate(stack, MAX_STACK_LENGTH));
}

/**
 * A summary of any thrown value that is safe to store in the attempt history:
 * bounded in size, plain data, and never throwing.
 *
 * Thrown primitives get `class` `'string'`, `'number'`, … (`'null'` for
 * `null`) and their text as `message`; objects without a string `message`
 * are rendered JSON-ish (cycles become `"[Circular]"`).
 *
 * @param maxMessageLength - longest `message` kept, in characters; longer ones
 *   end in `…`. @defaultValue 500
 */
export function describeError(err: unknown, maxMessageLength = 500): ErrorDescription {
  if (err === null) return { class: 'null', message: '' };
  if (typeof err !== 'object' && typeof err !== 'function') {
    // Symbols refuse template literals; String() converts every primitive.
    const message = err === undefined ? '' : String(err);
    return { class: typeof err, message: truncate(message, maxMessageLength) };
  }
  const message = readProperty(err, 'message');
  const description: ErrorDescription = {
    class: truncate(typeof err === 'function' ? 'function' : className(err), MAX_CLASS_LENGTH),
    message: truncate(typeof message === 'string' ? message : jsonish(err), maxMessageLength),
  };
  const status = readStatus(err);
  const code = readCode(err);
  if (status !== undefined) description.status = status;
  if (code !== undefined) description.code = code;
  return description;
}
