/**
 * Thrown by a handler to hold its job back until `untilMs` without using an
 * attempt: the job is deferred as a paused key's jobs are (reason `pause`,
 * counted against `maxDeferrals`), and its key is paused fleet-wide until
 * then so the key's other jobs wait too. Only for a job with a key (a
 * webhook's endpoint); a keyless job's DeferError is a plain failure. The
 * webhook worker throws it for an endpoint disabled because it kept failing:
 * its deliveries wait until it is enabled or they expire.
 */
export class DeferError extends Error {
  override name = 'DeferError';
  readonly untilMs: number;

  constructor(message: string, untilMs: number) {
    super(message);
    this.untilMs = untilMs;
  }
}

/** Whether `err` is a {@link DeferError} with a finite `untilMs` (by name too). Never throws. */
export function isDeferError(err: unknown): err is { name: 'DeferError'; untilMs: number } {
  try {
    return (
      typeof err === 'object' &&
      err !== null &&
      (err as { name?: unknown }).name === 'DeferError' &&
      Number.isFinite((err as { untilMs?: unknown }).untilMs)
    );
  } catch {
    return false;
  }
}
