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
  properties?: Record<string, unknown>;
}): string {
  const { id, body, properties = {} } = input;
  if (id !== undefined && id.length > 0 && id.length <= maxIdLength) return `id:${id}`;
  const hash = createHash('sha256');
  if (id !== undefined && id.length > 0) hash.update(`id\0${id}\0`);
  hash.update(stableJson(properties));
  hash.update('\0');
  hash.update(body);
  return `sha256:${hash.digest('hex')}`;
}

/** JSON with object keys sorted, so equal properties hash equally whatever their order. */
function stableJson(value: unknown): string {
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
