import { deadReasons, type DeadReason } from './dead-reason.js';

/**
 * A failure that will fail again however often it is retried (bad input, a
 * deleted resource, a rejected credential). Throw it from a job to send the
 * job straight to the dead-letter queue.
 */
export class PermanentError extends Error {
  override name = 'PermanentError';
  /** The reason the dead job is filed under. @defaultValue `permanent-error` */
  readonly deadReason: DeadReason | undefined;

  constructor(message: string, options: { cause?: unknown; deadReason?: DeadReason } = {}) {
    // Only pass `cause` when given, so `'cause' in err` stays false otherwise.
    super(message, 'cause' in options ? { cause: options.cause } : undefined);
    this.deadReason = options.deadReason;
  }
}

/** The dead reason a thrown value asks for (a {@link PermanentError}'s `deadReason`), if any. */
export function deadReasonOf(err: unknown): DeadReason | undefined {
  if (!isPermanentError(err)) return undefined;
  const reason = (err as { deadReason?: unknown }).deadReason;
  return (deadReasons as readonly unknown[]).includes(reason) ? (reason as DeadReason) : undefined;
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
