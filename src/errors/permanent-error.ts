/**
 * A failure that will fail again however often it is retried (bad input, a
 * deleted resource, a rejected credential). Throw it from a job to send the
 * job straight to the dead-letter queue.
 */
export class PermanentError extends Error {
  override name = 'PermanentError';

  constructor(message: string, options: { cause?: unknown } = {}) {
    // Only pass `cause` when given, so `'cause' in err` stays false otherwise.
    super(message, 'cause' in options ? { cause: options.cause } : undefined);
  }
}

/**
 * Whether `err` is a {@link PermanentError}: by `instanceof`, or by `name` for
 * one that crossed a process boundary (deserialised from a job) and lost its
 * prototype. Never throws.
 */
export function isPermanentError(err: unknown): err is Pick<PermanentError, 'name'> {
  try {
    return (
      err instanceof PermanentError ||
      (typeof err === 'object' &&
        err !== null &&
        (err as { name?: unknown }).name === 'PermanentError')
    );
  } catch {
    // A revoked Proxy or a throwing `name` getter is not one of ours.
    return false;
  }
}
