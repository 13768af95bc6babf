import { z } from 'zod';
import {
  brokerErrorSchema,
  captureBrokerError,
  reviveBrokerError,
  type BrokerError,
} from '../consumer/broker-error.js';
import { retryQueueNameFor } from '../consumer/dedupe-key.js';
import { brokerAttemptSchema, type BrokerAttempt } from '../consumer/hand-off.js';
import type { RetryPolicyInput } from '../../src/policy/retry-policy.js';
import type { AddOptions } from '../../src/scheduler/queue.js';
import type { StreamFields } from './message.js';

/**
 * The hand-off from a stream consumer to requeue: the name of the retry
 * queue, the idempotency key of a message's retry job, and the job's data.
 * The mechanism (the first run replays the stream attempt's error) is the
 * consumer core's: workers/consumer/hand-off.ts.
 */

/** Job name of every retry job. */
export const retryJobName = 'stream-message';

/**
 * The default retry queue of a stream's consumer group:
 * `<stream>.<group>.retry`, with `%`, `:`, `.`, `{` and `}` percent-encoded
 * so that the name is a valid requeue queue name and two streams or groups
 * never share one. Each group has its own, so that one group's retry worker
 * never runs another group's handler.
 */
export function defaultRetryQueueName(stream: string, group: string): string {
  return retryQueueNameFor([stream, group]);
}

/** The idempotency key of a message's retry job: `<stream>/<group>/<id>`. */
export function retryIdempotencyKey(stream: string, group: string, id: string): string {
  return `${stream}/${group}/${id}`;
}

/** A thrown value as the stream consumer saw it (the consumer core's `brokerErrorSchema`). */
export const streamErrorSchema = brokerErrorSchema;
export type StreamError = BrokerError;

export type { BrokerAttempt, BrokerError };

/** The stream attempt that failed and handed the message off (the core's `brokerAttemptSchema`). */
export const streamAttemptSchema = brokerAttemptSchema;
export type StreamAttempt = BrokerAttempt;

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
export const captureStreamError = captureBrokerError;

/** An Error the classifier reads as it read the original: same name, status, code, cause, `retryAfterMs`, `Retry-After` and dead reason. */
export const reviveStreamError = reviveBrokerError;

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
