/** Options for {@link RetryableError}. */
export interface RetryableErrorOptions {
  /** The error this one wraps. */
  cause?: unknown;
  /**
   * How long to wait before the next attempt, in ms, when the caller knows
   * better than the backoff (e.g. a rate limit's reset time). The classifier
   * caps it and ignores values that are not finite numbers ≥ 0.
   */
  retryAfterMs?: number;
}

/**
 * A failure that is expected to pass on a later attempt. Throw it from a job
 * to force a retry whatever the underlying error looks like.
 */
export class RetryableError extends Error {
  override name = 'RetryableError';
  /** See {@link RetryableErrorOptions.retryAfterMs}. */
  readonly retryAfterMs?: number;

  constructor(message: string, options: RetryableErrorOptions = {}) {
    // Only pass `cause` when given, so `'cause' in err` stays false otherwise.
    super(message, 'cause' in options ? { cause: options.cause } : undefined);
    if (options.retryAfterMs !== undefined) this.retryAfterMs = options.retryAfterMs;
  }
}

/**
 * Whether `err` is a {@link RetryableError}: by `instanceof`, or by `name` for
 * one that crossed a process boundary (deserialised from a job) and lost its
 * prototype. `retryAfterMs` stays `unknown` because a deserialised one may
 * carry anything there. Never throws.
 */
export function isRetryableError(
  err: unknown,
): err is Pick<RetryableError, 'name'> & { readonly retryAfterMs?: unknown } {
  try {
    return (
      err instanceof RetryableError ||
      (typeof err === 'object' &&
        err !== null &&
        (err as { name?: unknown }).name === 'RetryableError')
    );
  } catch {
    // A revoked Proxy or a throwing `name` getter is not one of ours.
    return false;
  }
}
