/** The handler call: a synchronous throw is a failure, a hang past `attemptTimeoutMs` a timeout. */
import { AttemptTimeoutError } from '../../errors/attempt-timeout-error.js';
import type { AttemptContext, RequeueJob } from './context.js';

/** What the handler did: returned `value`, or threw (or rejected with) `error`. */
export type Settled = { ok: true; value: unknown } | { ok: false; error: unknown };

/**
 * Runs the handler, turning a synchronous throw into a failure and a hang
 * past `attemptTimeoutMs` into an {@link AttemptTimeoutError} (the job's
 * signal is aborted; whatever the handler does later is ignored).
 */
export async function runHandler<T>(
  ctx: AttemptContext<T>,
  handle: RequeueJob<T>,
  abortable: () => AbortController,
  timeoutMs: number,
): Promise<Settled> {
  const run = (async () => ctx.handler(handle))().then(
    (value): Settled => ({ ok: true, value }),
    (error: unknown): Settled => ({ ok: false, error }),
  );
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<Settled>((resolve) => {
    timer = setTimeout(() => {
      const error = new AttemptTimeoutError(`attempt timed out after ${timeoutMs} ms`);
      abortable().abort(error);
      resolve({ ok: false, error });
    }, timeoutMs);
  });
  try {
    return await Promise.race([run, timedOut]);
  } finally {
    clearTimeout(timer);
  }
}
