/**
 * Redis keys through which the crash fixture (test/fixtures/crash-worker.ts)
 * reports to the test that started it. They sit under requeue's own prefix
 * for the queue, so `cleanQueue` removes them with the queue.
 */
export function crashKeys(queue: string) {
  const base = `requeue:{${queue}}:test`;
  return {
    /** List: `<jobId>:<attempt>` pushed by the handler as it starts. */
    started: `${base}:started`,
    /** Counter: handler calls, in every process. */
    calls: `${base}:calls`,
    /** Counter: completions, in every process. */
    completions: `${base}:completions`,
    /** List: ids of jobs a child process has dead-lettered. */
    dead: `${base}:dead`,
  };
}

/** What the crash fixture's handler does. */
export type CrashMode =
  /** Hang forever once started. */
  | 'hang'
  /** SIGKILL the process inside the handler. */
  | 'crash'
  /** Fail permanently, then SIGKILL the process in `onDead` (after the DLQ put, before the removal). */
  | 'die-on-dead';
/** Fail permanently, then SIGKILL the process when the DLQ put starts (after the dead mark). */
