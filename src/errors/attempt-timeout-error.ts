/**
 * An attempt that ran past `attemptTimeoutMs`: retryable, and counted as a
 * timeout. Named `TimeoutError`, like the platform's own (`AbortSignal.timeout`),
 * so the classifier files both under one name.
 */
export class AttemptTimeoutError extends Error {
  override name = 'TimeoutError';

  constructor(message: string, options: { cause?: unknown } = {}) {
    // Only pass `cause` when given, so `'cause' in err` stays false otherwise.
    super(message, 'cause' in options ? { cause: options.cause } : undefined);
  }
}

/**
 * Whether `err` is an {@link AttemptTimeoutError}: by `instanceof`, or by
 * `name` (`TimeoutError`) for one that crossed a process boundary and lost its
 * prototype — which also matches the platform's `TimeoutError`, a timeout all
 * the same. Never throws.
 */
export function isAttemptTimeoutError(err: unknown): err is Pick<AttemptTimeoutError, 'name'> {
  try {
    return (
      err instanceof AttemptTimeoutError ||
      (typeof err === 'object' &&
        err !== null &&
        (err as { name?: unknown }).name === 'TimeoutError')
    );
  } catch {
    // A revoked Proxy or a throwing `name` getter is not one of ours.
    return false;
  }
}
