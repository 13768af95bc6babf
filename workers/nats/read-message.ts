import type { JsMsg } from 'nats';
import type { ReadMessage } from '../consumer/broker-message.js';
import { messageDedupeKey } from '../consumer/dedupe-key.js';
import { sanitizeHeaders } from '../consumer/message-body.js';
import { readRepublished } from '../consumer/republish.js';

/**
 * A JetStream message as the consumer core reads it. Its id is the
 * producer's `Nats-Msg-Id`, else a hash of the body, subject, stream
 * sequence and stream timestamp (which never change on redelivery). Never
 * throws on missing or hostile headers.
 */
export function readNatsMessage(stream: string, msg: JsMsg): ReadMessage {
  const pairs: Record<string, string> = {};
  try {
    for (const [name, values] of msg.headers ?? []) pairs[name] = values.join(', ');
  } catch {
    // Unreadable headers: run without them.
  }
  const headers = sanitizeHeaders(pairs);
  const info = msg.info;
  // Keys in sorted order: the dedupe hash then serialises them without a replacer.
  const properties = {
    streamSequence: info.streamSequence,
    subject: msg.subject.slice(0, 1024),
    timestampNanos: Number(info.timestampNanos),
  };
  const natsId = headers['Nats-Msg-Id'];
  const raw = Buffer.from(msg.data.buffer, msg.data.byteOffset, msg.data.byteLength);
  // A retry requeue republished: a fresh delivery with its own key (see republish.ts).
  const republished = readRepublished(headers);
  return {
    broker: 'nats',
    source: stream,
    id: republished?.id ?? messageDedupeKey({ id: natsId, body: raw, properties }),
    republished,
    messageId: natsId,
    raw,
    headers,
    properties,
    deliveries: Math.max(1, info.deliveryCount),
  };
}
