import { z } from 'zod';
import { deadReasonOf } from '../../src/errors/permanent-error.js';
import { isRetryableError } from '../../src/errors/retryable-error.js';
import { describeError, readRetryAfterHeader } from '../../src/policy/classify/index.js';
import { readProperty } from '../../src/policy/classify/describe-error.js';
import { deadReasons } from '../../src/errors/dead-reason.js';
import type { RetryPolicyInput } from '../../src/policy/retry-policy.js';
import type { AddOptions } from '../../src/scheduler/queue.js';
import type { StreamFields } from './message.js';

/**
 * The hand-off from a stream consumer to requeue: the name of the retry
 * queue, the idempotency key of a message's retry job, and the job's data.
 *
 * The job carries the stream attempt's error. The retry worker's first run of
 * the job does not call the handler: it throws that error again, so that the
 * requeue worker classifies it and records it as attempt 1, then schedules
 * attempt 2 after the policy's first delay — or dead-letters the message.
 * Attempt numbers, delays, `maxAttempts` and `maxElapsedMs` thus count the
 * stream attempt exactly, and only the requeue worker decides death.
 */

/** Job name of every retry job. */
export const retryJobName = 'stream-message';

/** Characters a queue name must not carry: `:` (BullMQ), braces (cluster hash tags), `.` and `%` (our separators). */
const unsafeInQueueName = /[%:.{}]/g;

function encodeNamePart(part: string): string {
  return part.replace(
    unsafeInQueueName,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`,
  );
}

/**
 * The default retry queue of a stream's consumer group:
 * `<stream>.<group>.retry`, with `%`, `:`, `.`, `{` and `}` percent-encoded
 * so that the name is a valid requeue queue name and two streams or groups
 * never share one. Each group has its own, so that one group's retry worker
 * never runs another group's handler.
 */
export function defaultRetryQueueName(stream: string, group: string): string {
  return `${encodeNamePart(stream)}.${encodeNamePart(group)}.retry`;
}

/** The idempotency key of a message's retry job: `<stream>/<group>/<id>`. */
export function retryIdempotencyKey(stream: string, group: string, id: string): string {
  return `${stream}/${group}/${id}`;
}

/**
 * A thrown value as the stream consumer saw it, keeping what the classifier
 * reads: name, message, status, code, the cause's name and code, a
 * `RetryableError`'s `retryAfterMs`, a `Retry-After` header and a
 * `PermanentError`'s dead reason.
 */
export const streamErrorSchema = z.object({
  class: z.string(),
  message: z.string(),
  status: z.number().int().optional(),
  code: z.string().optional(),
  cause: z.object({ name: z.string().optional(), code: z.string().optional() }).optional(),
  retryAfterMs: z.number().optional(),
  retryAfter: z.union([z.string(), z.number()]).optional(),
  deadReason: z.enum(deadReasons).optional(),
});
export type StreamError = z.infer<typeof streamErrorSchema>;

/** The stream attempt that failed and handed the message off. */
export const streamAttemptSchema = z.object({
  /** The consumer that ran it. */
  consumer: z.string(),
  /** The entry's delivery count when it ran. */
  deliveries: z.int().min(1),
  /** When it failed, ms since the epoch. */
  failedAt: z.number(),
  error: streamErrorSchema,
});
export type StreamAttempt = z.infer<typeof streamAttemptSchema>;

/** The data of a retry job, with `fields` checked by `fields` (strings by default). */
export function retryJobDataSchema<F>(fields: z.ZodType<F>) {
  return z.object({
    stream: z.string(),
    group: z.string(),
    /** The entry's stream id. */
    id: z.string(),
    fields,
    streamAttempt: streamAttemptSchema,
  });
}

/** The data of a retry job. */
export interface StreamRetryJobData<F = StreamFields> {
  stream: string;
  group: string;
  id: string;
  fields: F;
  streamAttempt: StreamAttempt;
}

/** Summarises a thrown value so it survives the trip through Redis. Never throws. */
export function captureStreamError(err: unknown): StreamError {
  const { class: name, message, status, code } = describeError(err);
  const out: StreamError = { class: name, message };
  if (status !== undefined) out.status = status;
  if (code !== undefined) out.code = code;
  const cause = readProperty(err, 'cause');
  const causeName = readProperty(cause, 'name');
  const causeCode = readProperty(cause, 'code');
  if (typeof causeName === 'string' || typeof causeCode === 'string') {
    out.cause = {
      ...(typeof causeName === 'string' && { name: causeName }),
      ...(typeof causeCode === 'string' && { code: causeCode }),
    };
  }
  const retryAfterMs = isRetryableError(err) ? readProperty(err, 'retryAfterMs') : undefined;
  if (typeof retryAfterMs === 'number' && Number.isFinite(retryAfterMs)) {
    out.retryAfterMs = retryAfterMs;
  }
  const retryAfter = readRetryAfterHeader(err);
  if (typeof retryAfter === 'string' || typeof retryAfter === 'number') {
    out.retryAfter = retryAfter;
  }
  const deadReason = deadReasonOf(err);
  if (deadReason !== undefined) out.deadReason = deadReason;
  return out;
}

/**
 * An Error the classifier reads as it read the original: same `name`,
 * `status`, `code`, cause, `retryAfterMs`, `Retry-After` and dead reason.
 * (A `classify.predicate` that tests `instanceof` sees a plain Error.)
 */
export function reviveStreamError(error: StreamError): Error {
  const revived = new Error(error.message) as Error & Record<string, unknown>;
  revived.name = error.class;
  if (error.status !== undefined) revived.status = error.status;
  if (error.code !== undefined) revived.code = error.code;
  if (error.cause !== undefined) revived.cause = { ...error.cause };
  if (error.retryAfterMs !== undefined) revived.retryAfterMs = error.retryAfterMs;
  if (error.retryAfter !== undefined) revived.headers = { 'retry-after': error.retryAfter };
  if (error.deadReason !== undefined) revived.deadReason = error.deadReason;
  return revived;
}

/** What the consumer adds to the retry queue for a message whose stream attempt failed. */
export interface RetryJob {
  name: string;
  /** The entry's fields as read from the stream: the retry worker validates them. */
  data: StreamRetryJobData<StreamFields>;
  opts: AddOptions;
}

/**
 * The retry job of a message. No `delayMs`: the job's first run only
 * replays the stream attempt's failure, and the requeue worker delays the
 * next run by the policy's first delay.
 */
export function retryJobFor(input: {
  stream: string;
  group: string;
  id: string;
  fields: StreamFields;
  streamAttempt: StreamAttempt;
  policy?: RetryPolicyInput;
}): RetryJob {
  const { stream, group, id, fields, streamAttempt, policy } = input;
  return {
    name: retryJobName,
    data: { stream, group, id, fields, streamAttempt },
    opts: {
      idempotencyKey: retryIdempotencyKey(stream, group, id),
      tags: { streamId: id, stream, group },
      ...(policy !== undefined && { policy }),
    },
  };
}
