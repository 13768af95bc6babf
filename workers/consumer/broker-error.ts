import { z } from 'zod';
import { deadReasonOf } from '../../src/errors/permanent-error.js';
import { isRetryableError } from '../../src/errors/retryable-error.js';
import { deadReasons } from '../../src/errors/dead-reason.js';
import { describeError, readRetryAfterHeader } from '../../src/policy/classify/index.js';
import { readProperty } from '../../src/policy/classify/describe-error.js';

/**
 * A thrown value as a broker consumer saw it, keeping what the classifier
 * reads: name, message, status, code, the cause's name and code, a
 * `RetryableError`'s `retryAfterMs`, a `Retry-After` header and a
 * `PermanentError`'s dead reason. Stored in a hand-off job, so the requeue
 * worker classifies the broker attempt as if it had run it.
 */
export const brokerErrorSchema = z.object({
  class: z.string(),
  message: z.string(),
  status: z.number().int().optional(),
  code: z.string().optional(),
  cause: z.object({ name: z.string().optional(), code: z.string().optional() }).optional(),
  retryAfterMs: z.number().optional(),
  retryAfter: z.union([z.string(), z.number()]).optional(),
  deadReason: z.enum(deadReasons).optional(),
});

/** A broker attempt's error, as stored. */
export type BrokerError = z.infer<typeof brokerErrorSchema>;

/** Summarises a thrown value so it survives the trip through Redis. Never throws. */
export function captureBrokerError(err: unknown): BrokerError {
  const { class: name, message, status, code } = describeError(err);
  const out: BrokerError = { class: name, message };
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
export function reviveBrokerError(error: BrokerError): Error {
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
