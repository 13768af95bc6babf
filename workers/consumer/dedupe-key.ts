import { createHash } from 'node:crypto';

/** Characters a queue name must not carry: `:` (BullMQ), braces (cluster hash tags), `.` and `%` (our separators). */
const unsafeInQueueName = /[%:.{}]/g;

function encodeNamePart(part: string): string {
  return part.replace(
    unsafeInQueueName,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`,
  );
}

/**
 * The default retry queue of a broker source: its parts (a stream and group,
 * an AMQP queue, a JetStream stream and consumer) joined by `.` and followed
 * by `.retry`, with `%`, `:`, `.`, `{` and `}` percent-encoded in each part so
 * that the name is a valid requeue queue name and two sources never share one.
 */
export function retryQueueNameFor(parts: readonly string[]): string {
  return `${parts.map(encodeNamePart).join('.')}.retry`;
}

/** The longest message id used as it is in a dedupe key; longer ones are hashed. */
const maxIdLength = 200;

/**
 * What identifies one message across redeliveries: the broker's or the
 * producer's message id when there is one, else a SHA-256 of the body and
 * the properties that do not change on redelivery (the caller leaves out
 * delivery counts and flags). Used in the hand-off job's idempotency key, so
 * a redelivered message is handed off once.
 */
export function messageDedupeKey(input: {
  id?: string | undefined;
  body: Uint8Array;
  /** Or a function that makes them: called only when there is no usable id. */
  properties?: Record<string, unknown> | (() => Record<string, unknown>);
}): string {
  const { id, body, properties = {} } = input;
  if (id !== undefined && id.length > 0 && id.length <= maxIdLength) return `id:${id}`;
  const hash = createHash('sha256');
  if (id !== undefined && id.length > 0) hash.update(`id\0${id}\0`);
  hash.update(stableJson(typeof properties === 'function' ? properties() : properties));
  hash.update('\0');
  hash.update(body);
  return `sha256:${hash.digest('hex')}`;
}

/** JSON with object keys sorted, so equal properties hash equally whatever their order. */
function stableJson(value: unknown): string {
  // The common case (flat, keys already in order) without a replacer: the same text, faster.
  if (flatAndSorted(value)) return JSON.stringify(value);
  return JSON.stringify(value, (_key, v: unknown) => {
    if (typeof v === 'bigint') return v.toString();
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return v;
    const o = v as Record<string, unknown>;
    return Object.fromEntries(
      Object.keys(o)
        .sort()
        .map((k) => [k, o[k]]),
    );
  });
}

/** Whether `value` is an object of primitives (no bigint) whose keys are in sorted order. */
function flatAndSorted(value: unknown): boolean {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  let previous: string | undefined;
  for (const key in value) {
    if (!Object.hasOwn(value, key)) return false;
    const v = (value as Record<string, unknown>)[key];
    if (v !== null && typeof v === 'object') return false;
    if (typeof v === 'bigint' || typeof v === 'function' || typeof v === 'symbol') return false;
    if (previous !== undefined && !(previous < key)) return false;
    previous = key;
  }
  return true;
}
