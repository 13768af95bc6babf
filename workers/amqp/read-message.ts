import type { ConsumeMessage } from 'amqplib';
import type { ReadMessage } from '../consumer/broker-message.js';
import { messageDedupeKey } from '../consumer/dedupe-key.js';
import { sanitizeHeaders } from '../consumer/message-body.js';
import { readRepublished } from '../consumer/republish.js';

/** Headers the broker changes on redelivery: not part of a message's identity. */
/** The string AMQP properties a hand-off keeps (and a republish sends again). */
export const stringProperties = [
  'contentType',
  'contentEncoding',
  'correlationId',
  'type',
  'appId',
] as const;

const deliveryHeaders = new Set(['x-delivery-count', 'x-death', 'x-first-death-reason']);

/**
 * A delivered AMQP message as the consumer core reads it. Its id is the
 * producer's `messageId`, else a hash of the body and the properties that do
 * not change on redelivery. Its delivery count is a quorum queue's
 * `x-delivery-count` + 1, else 2 when redelivered, else 1. Never throws on
 * missing properties or hostile headers.
 */
export function readAmqpMessage(queue: string, msg: ConsumeMessage): ReadMessage {
  const props = (msg.properties ?? {}) as unknown as Record<string, unknown>;
  const rawHeaders = (props.headers ?? {}) as Record<string, unknown>;
  const headers = sanitizeHeaders(rawHeaders);
  const stableHeaders = () =>
    Object.fromEntries(Object.entries(headers).filter(([name]) => !deliveryHeaders.has(name)));
  const properties: Record<string, string | number | boolean> = {
    exchange: msg.fields.exchange,
    routingKey: msg.fields.routingKey,
  };
  for (const name of stringProperties) {
    const value = props[name];
    if (typeof value === 'string') properties[name] = value.slice(0, 1024);
  }
  if (typeof props.timestamp === 'number') properties.timestamp = props.timestamp;
  const messageId = typeof props.messageId === 'string' ? props.messageId : undefined;
  const deliveryCount = Number(rawHeaders['x-delivery-count']);
  const deliveries =
    Number.isInteger(deliveryCount) && deliveryCount >= 0
      ? deliveryCount + 1
      : msg.fields.redelivered
        ? 2
        : 1;
  const content = Buffer.isBuffer(msg.content) ? msg.content : Buffer.alloc(0);
  // A retry requeue republished: a fresh delivery with its own key (see republish.ts).
  const republished = readRepublished(headers);
  return {
    broker: 'amqp',
    source: queue,
    id:
      republished?.id ??
      messageDedupeKey({
        id: messageId,
        body: content,
        // Only read when there is no usable message id.
        properties: () => ({ ...properties, headers: stableHeaders() }),
      }),
    republished,
    messageId,
    raw: content,
    headers,
    properties,
    deliveries,
  };
}
