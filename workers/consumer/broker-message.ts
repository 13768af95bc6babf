import { z } from 'zod';
import { formatZodError } from '../../src/config/env.js';
import { PermanentError } from '../../src/errors/permanent-error.js';
import type { RetryPolicyInput } from '../../src/policy/retry-policy.js';
import type { AddOptions } from '../../src/scheduler/queue.js';
import { captureBrokerError, type BrokerError } from './broker-error.js';
import { brokerAttemptSchema, type BrokerAttempt } from './hand-off.js';
import { decodeBody, messageHeadersSchema, type MessageHeaders } from './message-body.js';

/**
 * One broker message as a handler sees it, whether the broker consumer runs
 * it (attempt 1) or the retry worker does (attempts 2, 3, …).
 */
export interface BrokerMessage<B = unknown> {
  /** Which broker: `amqp` or `nats`. */
  readonly broker: string;
  /** The AMQP queue or the JetStream stream the message came from. */
  readonly source: string;
  /**
   * What identifies the message across redeliveries and retries (see
   * `messageDedupeKey`; a retry republished by requeue keeps the first
   * message's). Dedupe side effects on it.
   */
  readonly id: string;
  /** The producer's message id, when it set one. */
  readonly messageId: string | undefined;
  /** The body: parsed as JSON when it is JSON, else text when UTF-8, and checked by the `schema` option. */
  readonly body: B;
  /** The body's bytes. */
  readonly raw: Buffer;
  /** The headers, every value a string (see `sanitizeHeaders`). */
  readonly headers: Readonly<MessageHeaders>;
  /** The broker's other properties (AMQP content type, routing key; JetStream subject, sequence). */
  readonly properties: Readonly<Record<string, string | number | boolean>>;
  /** 1-based attempt number: 1 is the run from the broker; a DLQ replay starts again at 1. */
  readonly attempt: number;
  /** How many times the broker had delivered the message when attempt 1 ran. */
  readonly deliveries: number;
  /** Aborted when the process is closing with a deadline. */
  readonly signal: AbortSignal;
}

/** Processes one message; throw to have it retried (or dead-lettered) by requeue. */
export type BrokerHandler<B = unknown> = (message: BrokerMessage<B>) => Promise<void>;

const propertyValue = z.union([z.string(), z.number(), z.boolean()]);

/** The data of a broker message's hand-off job. */
export const brokerJobDataSchema = z.object({
  broker: z.string(),
  source: z.string(),
  id: z.string(),
  messageId: z.string().optional(),
  /** The body, base64. Empty when it was over `maxBodyBytes` (then `bodyBytes` says how big). */
  body: z.string(),
  bodyBytes: z.int().min(0).optional(),
  headers: messageHeadersSchema,
  properties: z.record(z.string(), propertyValue),
  brokerAttempt: brokerAttemptSchema,
  /** The first message's id when this one was a retry republished by requeue (`x-requeue-retry-of`). */
  retryOf: z.string().max(512).optional(),
});

/** The data of a broker message's hand-off job. */
export type BrokerJobData = z.infer<typeof brokerJobDataSchema>;

/** Job name of every broker hand-off job. */
export const brokerJobName = 'broker-message';

/** What a republished message's headers say (see `readRepublished`). */
export interface Republished {
  /** The attempt number this delivery is. */
  attempt: number;
  /** The dedupe key of the chain's first message. */
  retryOf: string;
  /** The dedupe key of this delivery. */
  id: string;
}

/** A message as the broker consumer read it, before the handler ran. */
export interface ReadMessage {
  broker: string;
  source: string;
  id: string;
  messageId: string | undefined;
  raw: Buffer;
  headers: MessageHeaders;
  properties: Record<string, string | number | boolean>;
  deliveries: number;
  /** Set when requeue republished this message as a retry (see `readRepublished`). */
  republished?: Republished | undefined;
}

/** Why a message cannot be run at all (too big, or not valid for the schema), as a broker error; else its body. */
export function prepareBody<B>(
  read: { raw: Buffer },
  limits: { maxBodyBytes: number; schema: z.ZodType<B> | undefined },
): { ok: true; body: B } | { ok: false; error: BrokerError } {
  if (read.raw.length > limits.maxBodyBytes) {
    return {
      ok: false,
      error: captureBrokerError(
        new PermanentError(
          `body of ${read.raw.length} bytes is over maxBodyBytes (${limits.maxBodyBytes}); not stored`,
          { deadReason: 'invalid-payload' },
        ),
      ),
    };
  }
  const decoded = decodeBody(read.raw);
  if (!limits.schema) return { ok: true, body: decoded as B };
  const parsed = limits.schema.safeParse(decoded);
  if (parsed.success) return { ok: true, body: parsed.data };
  return {
    ok: false,
    error: captureBrokerError(
      new PermanentError(formatZodError(parsed.error, 'body'), { deadReason: 'invalid-payload' }),
    ),
  };
}

/** The hand-off job of a message whose broker attempt failed. */
export function brokerRetryJob(input: {
  read: ReadMessage;
  attempt: BrokerAttempt;
  maxBodyBytes: number;
  policy?: RetryPolicyInput | undefined;
}): { name: string; data: BrokerJobData; opts: AddOptions } {
  const { read, attempt, maxBodyBytes, policy } = input;
  const tooBig = read.raw.length > maxBodyBytes;
  return {
    name: brokerJobName,
    data: {
      broker: read.broker,
      source: read.source,
      id: read.id,
      ...(read.messageId !== undefined && { messageId: read.messageId }),
      body: tooBig ? '' : read.raw.toString('base64'),
      ...(tooBig && { bodyBytes: read.raw.length }),
      headers: read.headers,
      properties: read.properties,
      brokerAttempt: read.republished
        ? { ...attempt, priorAttempts: read.republished.attempt - 1 }
        : attempt,
      ...(read.republished && { retryOf: read.republished.retryOf }),
    },
    opts: {
      idempotencyKey: handOffKey(read.broker, read.source, read.id),
      tags: { broker: read.broker, source: read.source },
      ...(policy !== undefined && { policy }),
    },
  };
}

/** The idempotency key of a message's hand-off job: `<broker>/<source>/<dedupe key>`. */
export function handOffKey(broker: string, source: string, id: string): string {
  return `${broker}/${source}/${id}`;
}

/** The message a retry run hands the handler, from its stored job. */
export function messageFromJob<B>(
  data: BrokerJobData,
  run: { attempt: number; signal: AbortSignal },
  limits: { maxBodyBytes: number; schema: z.ZodType<B> | undefined },
): BrokerMessage<B> {
  if (data.bodyBytes !== undefined) {
    throw new PermanentError(`body of ${data.bodyBytes} bytes was not stored`, {
      deadReason: 'invalid-payload',
    });
  }
  const raw = Buffer.from(data.body, 'base64');
  const prepared = prepareBody({ raw }, limits);
  if (!prepared.ok) {
    throw new PermanentError(prepared.error.message, { deadReason: 'invalid-payload' });
  }
  return Object.freeze({
    broker: data.broker,
    source: data.source,
    // A republished chain keeps the first message's id for the handler.
    id: data.retryOf ?? data.id,
    messageId: data.messageId,
    body: prepared.body,
    raw,
    headers: Object.freeze({ ...data.headers }),
    properties: Object.freeze({ ...data.properties }),
    attempt: run.attempt,
    deliveries: data.brokerAttempt.deliveries,
    signal: run.signal,
  });
}

/** The message the broker attempt hands the handler. */
export function messageFromRead<B>(
  read: ReadMessage,
  body: B,
  signal: AbortSignal,
  attempt = 1,
): BrokerMessage<B> {
  return Object.freeze({
    broker: read.broker,
    source: read.source,
    // A republished retry: the first message's id, so side effects dedupe across the chain.
    id: read.republished?.retryOf ?? read.id,
    messageId: read.messageId,
    body,
    raw: read.raw,
    // Made for this delivery alone: frozen in place, not copied.
    headers: Object.freeze(read.headers),
    properties: Object.freeze(read.properties),
    attempt,
    deliveries: read.deliveries,
    signal,
  });
}
