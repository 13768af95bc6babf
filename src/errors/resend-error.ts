/** Why a resend was refused. */
export type ResendErrorCode = 'not-found' | 'not-delivered' | 'too-many';

/**
 * A resend refused: no delivery of that message to that endpoint is known,
 * it has not been delivered (it waits, retries or is dead: retry-now or
 * recover it instead), or it was resent too many times.
 */
export class ResendError extends Error {
  override name = 'ResendError';

  constructor(
    message: string,
    readonly code: ResendErrorCode,
  ) {
    super(message);
  }
}

/** Whether `err` is a {@link ResendError}, by `instanceof` or by name. */
export function isResendError(err: unknown): err is ResendError {
  try {
    return (
      err instanceof ResendError ||
      (typeof err === 'object' &&
        err !== null &&
        (err as { name?: unknown }).name === 'ResendError')
    );
  } catch {
    // A revoked Proxy or a throwing `name` getter is not one of ours.
    return false;
  }
}
