import { z } from 'zod';
import { limits } from '../limits.js';
import { parseConfig } from '../../util/parse-config.js';
import { isPermanentError } from '../../errors/permanent-error.js';
import { isRetryableError } from '../../errors/retryable-error.js';
import { readCodes, readProperty, readStatus } from './describe-error.js';
import { parseRetryAfter, readRetryAfterHeader } from './retry-after.js';

/**
 * A caller's own rule, asked first: `true` retries, `false` gives up, and
 * `undefined` leaves the decision to the built-in rules.
 */
export type RetryPredicate = (err: unknown) => boolean | undefined;

/**
 * Network error codes that are always retried: the peer or the path failed,
 * not the request. `true` marks the ones that mean a timeout. ENOTFOUND is
 * left out on purpose: a name that does not resolve rarely starts to within a
 * retry window, unlike EAI_AGAIN (the resolver itself failed). Add it with
 * `retryableCodes` if your DNS is flaky.
 */
const NETWORK_CODES: ReadonlyMap<string, boolean> = new Map([
  ['ECONNRESET', false],
  ['ECONNREFUSED', false],
  ['ECONNABORTED', false],
  ['EPIPE', false],
  ['EAI_AGAIN', false],
  ['EHOSTUNREACH', false],
  ['ENETUNREACH', false],
  ['ETIMEDOUT', true],
  // undici (Node's fetch) puts these on the `cause` of `TypeError: fetch failed`.
  ['UND_ERR_SOCKET', false],
  ['UND_ERR_CLOSED', false],
  ['UND_ERR_CONNECT_TIMEOUT', true],
  ['UND_ERR_HEADERS_TIMEOUT', true],
  ['UND_ERR_BODY_TIMEOUT', true],
]);

/**
 * Node's codes for a TLS certificate the client refused: self-signed,
 * expired, not yet valid, for another name, or signed by no CA it trusts.
 * Retried on the schedule (a certificate gets fixed), as reason
 * `tls-certificate` so history, metrics and the dashboard can say so.
 */
const TLS_CERT_CODES: ReadonlySet<string> = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_REVOKED',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'CERT_SIGNATURE_FAILURE',
  'INVALID_CA',
  'PATH_LENGTH_EXCEEDED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'HOSTNAME_MISMATCH',
]);

/** Error names meaning the caller stopped waiting (`AbortSignal.timeout()` gives TimeoutError). */
const TIMEOUT_NAMES: ReadonlySet<unknown> = new Set(['AbortError', 'TimeoutError']);

const httpStatus = z.number().int().min(100).max(599);

/**
 * Options of {@link classifyError}, with their defaults. Arrays come out
 * frozen; `.prefault` runs the defaults through `.readonly()` as well.
 */
export const classifyOptionsSchema = z
  .strictObject({
    /**
     * Statuses retried (408 also counts as a timeout). Any other 4xx or 5xx
     * (e.g. 501 Not Implemented, 505) is permanent: it will answer the same.
     * @defaultValue `[408, 425, 429, 500, 502, 503, 504]`
     */
    retryableStatuses: z.array(httpStatus).readonly().prefault([408, 425, 429, 500, 502, 503, 504]),
    /** Statuses meaning the resource is gone for good (reason `gone`). @defaultValue `[410]` */
    goneStatuses: z.array(httpStatus).readonly().prefault([410]),
    /** Error codes retried in addition to the built-in network codes. @defaultValue `[]` */
    retryableCodes: z.array(z.string().min(1)).readonly().prefault([]),
    /**
     * What to do with errors no rule recognises: a plain `Error`, a thrown
     * string. Retrying is the safe default for background jobs (seed 001).
     * @defaultValue `'retry'`
     */
    unknownErrors: z.enum(['retry', 'permanent']).default('retry'),
    /**
     * Longest `Retry-After` honoured, in ms: a server (or a bug) asking for
     * a day must not park a job for a day. @defaultValue `300_000` (5 minutes)
     */
    maxRetryAfterMs: z.number().int().nonnegative().max(limits.delayMs).default(300_000),
    /** See {@link RetryPredicate}. Not serialisable, so set it in code, not in stored config. */
    predicate: z
      .custom<RetryPredicate>((value) => typeof value === 'function', 'must be a function')
      .optional(),
  })
  .superRefine((options, ctx) => {
    // Both sets claiming a status would make the outcome depend on rule order.
    for (const status of options.goneStatuses) {
      if (options.retryableStatuses.includes(status)) {
        ctx.addIssue({
          code: 'custom',
          path: ['goneStatuses'],
          message: `${status} is also in retryableStatuses`,
        });
      }
    }
  });

/** Validated options of {@link classifyError}. */
export type ClassifyOptions = z.output<typeof classifyOptionsSchema>;

/** Options as a caller writes them: every field optional. */
export type ClassifyOptionsInput = z.input<typeof classifyOptionsSchema>;

/**
 * Validates classifier options and fills in defaults; throws a
 * `ConfigError` naming the field (`classify.maxRetryAfterMs: …`).
 */
export function parseClassifyOptions(input: unknown): ClassifyOptions {
  return parseConfig(classifyOptionsSchema, input, 'classify');
}

/** The defaults, validated. */
export const defaultClassifyOptions: ClassifyOptions = Object.freeze(parseClassifyOptions({}));

/** Why a failure is retried. */
export type RetryReason =
  | 'http-status'
  | 'network'
  | 'timeout'
  | 'tls-certificate'
  | 'retryable-error'
  | 'unknown-error'
  | 'predicate';

/** Why a failure is not retried. */
export type PermanentReason =
  | 'http-status'
  | 'gone'
  | 'permanent-error'
  | 'unrecoverable-error'
  | 'unknown-error'
  | 'predicate';

/**
 * BullMQ's `UnrecoverableError`, by name (the policy layer imports no BullMQ
 * value; BullMQ sets `name` to the class's name): a handler moved from BullMQ
 * that throws it means "do not retry", and requeue dead-letters it at once.
 */
function isUnrecoverableError(err: unknown): boolean {
  return readProperty(err, 'name') === 'UnrecoverableError';
}

/** Retry this failure. */
export interface RetryClassification {
  readonly kind: 'retry';
  readonly reason: RetryReason;
  /** The wait the server or error asked for, in ms, capped at `maxRetryAfterMs`. */
  readonly retryAfterMs?: number;
  readonly status?: number;
  readonly code?: string;
  /** Whether the failure was a timeout (408, ETIMEDOUT, AbortError, …). */
  readonly timeout: boolean;
}

/** Do not retry this failure: dead-letter it. */
export interface PermanentClassification {
  readonly kind: 'permanent';
  readonly reason: PermanentReason;
  readonly status?: number;
  readonly code?: string;
}

/** The verdict on one failure. */
export type Classification = RetryClassification | PermanentClassification;

/** A finite `ms` ≥ 0 capped at `max` and rounded up to whole ms, else `undefined`. */
function capDelay(ms: unknown, max: number): number | undefined {
  return typeof ms === 'number' && Number.isFinite(ms) && ms >= 0
    ? Math.min(Math.ceil(ms), max)
    : undefined;
}

/**
 * Decides whether a failure is worth retrying. The first rule that matches
 * wins:
 *
 * 1. `options.predicate`, when it returns a boolean.
 * 2. {@link PermanentError} → permanent; BullMQ's `UnrecoverableError` →
 *    permanent (`unrecoverable-error`); {@link RetryableError} → retry.
 * 3. An HTTP status in 400..599 (see `readStatus` in `describe-error.ts`): `retryableStatuses`
 *    retry, `goneStatuses` are `gone`, every other one is permanent.
 *    Statuses below 400 say nothing about the failure and fall through.
 * 4. A TLS certificate code on the error or its `cause` → retry, reason
 *    `tls-certificate`; else a network code (built-in list or
 *    `retryableCodes`) → retry, reason `timeout` for the timeout codes.
 * 5. An `AbortError` or `TimeoutError` (also a DOMException, also as `cause`)
 *    → retry, reason `timeout`.
 * 6. Anything else → `options.unknownErrors`.
 *
 * A retry carries `retryAfterMs` from the RetryableError's own value, else
 * from a `Retry-After` header on the error, capped at `maxRetryAfterMs`.
 * Pure: `now` (epoch ms) only resolves a `Retry-After` date.
 *
 * @throws whatever `options.predicate` throws; nothing else.
 * @see seed 001's decision tree (which statuses are transient).
 */
export function classifyError(err: unknown, options: ClassifyOptions, now: number): Classification {
  const status = readStatus(err);
  const codes = readCodes(err);
  const networkCode = codes.find((c) => NETWORK_CODES.has(c) || options.retryableCodes.includes(c));
  const tlsCode = codes.find((c) => TLS_CERT_CODES.has(c));
  const code = tlsCode ?? networkCode ?? codes[0];
  const timeoutName =
    TIMEOUT_NAMES.has(readProperty(err, 'name')) ||
    TIMEOUT_NAMES.has(readProperty(readProperty(err, 'cause'), 'name'));
  const timeout =
    status === 408 ||
    (networkCode !== undefined && NETWORK_CODES.get(networkCode) === true) ||
    timeoutName;
  const facts = {
    ...(status !== undefined && { status }),
    ...(code !== undefined && { code }),
  };

  const retry = (reason: RetryReason): RetryClassification => {
    const own = isRetryableError(err)
      ? capDelay(readProperty(err, 'retryAfterMs'), options.maxRetryAfterMs)
      : undefined;
    const retryAfterMs =
      own ?? capDelay(parseRetryAfter(readRetryAfterHeader(err), now), options.maxRetryAfterMs);
    return {
      kind: 'retry',
      reason,
      ...(retryAfterMs !== undefined && { retryAfterMs }),
      ...facts,
      timeout,
    };
  };
  const permanent = (reason: PermanentReason): PermanentClassification => ({
    kind: 'permanent',
    reason,
    ...facts,
  });

  const verdict = options.predicate?.(err);
  if (verdict === true) return retry('predicate');
  if (verdict === false) return permanent('predicate');

  if (isPermanentError(err)) return permanent('permanent-error');
  if (isUnrecoverableError(err)) return permanent('unrecoverable-error');
  if (isRetryableError(err)) return retry('retryable-error');

  if (status !== undefined && options.retryableStatuses.includes(status))
    return retry('http-status');
  if (status !== undefined && options.goneStatuses.includes(status)) return permanent('gone');
  if (status !== undefined && status >= 400) return permanent('http-status');

  if (tlsCode !== undefined) return retry('tls-certificate');
  if (networkCode !== undefined) return retry(timeout ? 'timeout' : 'network');
  if (timeoutName) return retry('timeout');

  return options.unknownErrors === 'retry' ? retry('unknown-error') : permanent('unknown-error');
}
