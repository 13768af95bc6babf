/** How a promise raced against a deadline ended. */
export type DeadlineOutcome<T> = { kind: 'settled'; value: T } | { kind: 'timeout' };

/**
 * Waits for `promise` for at most `timeoutMs`: close with a deadline. The
 * timer is unref'd and cleared, so it neither holds the process nor fires
 * late. A rejection of `promise` before the deadline is passed through; one
 * after it is swallowed (nobody is waiting for it any more).
 */
export async function withDeadline<T>(
  promise: PromiseLike<T>,
  timeoutMs: number,
): Promise<DeadlineOutcome<T>> {
  const settled = Promise.resolve(promise).then((value) => ({ kind: 'settled', value }) as const);
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<{ kind: 'timeout' }>((resolve) => {
    timer = setTimeout(() => resolve({ kind: 'timeout' }), Math.max(0, timeoutMs));
    timer.unref();
  });
  try {
    const outcome = await Promise.race([settled, deadline]);
    if (outcome.kind === 'timeout') settled.catch(() => undefined);
    return outcome;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Resolves after `ms`, or at once when `signal` aborts (it never rejects:
 * a sleep cut short by a shutdown is not an error).
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
