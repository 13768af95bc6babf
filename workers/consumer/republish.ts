import type { RequeueJob } from '../../src/scheduler/attempt/context.js';
import type { BrokerJobData, Republished } from './broker-message.js';
import { messageDedupeKey } from './dedupe-key.js';
import type { MessageHeaders } from './message-body.js';

/**
 * Republishing a due retry to the broker instead of running it in the retry
 * worker's process. The republished message carries these headers; the
 * consumer reads them back so that the message is a fresh delivery with its
 * own dedupe key (`<first id>#<replays>.<attempt>`: never the first
 * message's hand-off, yet a redelivery or a second publish of the same retry
 * attempt shares it) and the handler sees the attempt number.
 */
export const republishHeaderNames = {
  /** The attempt number the handler sees (1-based, counted across the republished chain). */
  attempt: 'x-requeue-attempt',
  /** The dedupe key of the first message of the chain. */
  retryOf: 'x-requeue-retry-of',
  /** How many times requeue's DLQ replayed the chain. */
  replays: 'x-requeue-replays',
} as const;

const maxAttemptHeader = 10_000;

/** The republish headers of a message, or `undefined` when it was not republished by requeue (or they are malformed). */
export function readRepublished(headers: MessageHeaders): Republished | undefined {
  const retryOf = headers[republishHeaderNames.retryOf];
  const attemptText = headers[republishHeaderNames.attempt];
  if (retryOf === undefined || attemptText === undefined || retryOf.length === 0) return undefined;
  if (retryOf.length > 512 || !/^\d{1,5}$/.test(attemptText)) return undefined;
  const attempt = Number(attemptText);
  if (attempt < 1 || attempt > maxAttemptHeader) return undefined;
  const replaysText = headers[republishHeaderNames.replays] ?? '0';
  const replays = /^\d{1,6}$/.test(replaysText) ? Number(replaysText) : 0;
  return {
    attempt,
    retryOf,
    id: messageDedupeKey({ id: `${retryOf}#${replays}.${attempt}`, body: new Uint8Array() }),
  };
}

/**
 * The headers of a due retry republished from its hand-off job: the stored
 * headers plus the attempt (counted from the chain's start; a DLQ replay
 * starts again at 1), the chain's first id and the DLQ replays.
 */
export function republishHeaders(
  job: Pick<RequeueJob<BrokerJobData>, 'data' | 'attempt' | 'replays'>,
): { headers: Record<string, string>; attempt: number; retryOf: string; replays: number } {
  const { data } = job;
  const prior = job.replays > 0 ? 0 : (data.brokerAttempt.priorAttempts ?? 0);
  const attempt = prior + job.attempt;
  const retryOf = data.retryOf ?? data.id;
  return {
    headers: {
      ...data.headers,
      [republishHeaderNames.attempt]: String(attempt),
      [republishHeaderNames.retryOf]: retryOf,
      [republishHeaderNames.replays]: String(job.replays),
    },
    attempt,
    retryOf,
    replays: job.replays,
  };
}
