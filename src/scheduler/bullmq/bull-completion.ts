import type { Job } from 'bullmq';
import { StoredResult } from '../../policy/outcome.js';

/**
 * What of BullMQ's queue backend a completion goes through (BullMQ 6.7: its
 * `moveToCompleted`, `moveToCompletedArgs`, `moveToFinishedArgs` and
 * `moveToFinished`). Part of what `bull-worker.ts` knows of BullMQ's insides;
 * `test/integration/job-moves.test.ts` fails if an upgrade changes it.
 */
export interface CompletionBackend {
  readonly moveToFinishedKeys: readonly unknown[];
  moveToFinished(jobId: string, args: unknown[]): Promise<unknown>;
  moveToCompleted(
    job: Job,
    returnValue: unknown,
    removeOnComplete: unknown,
    token: string,
    fetchNext?: boolean,
  ): Promise<{ result: unknown; finishedOn: number }>;
  moveToCompletedArgs(
    job: Job,
    returnvalue: unknown,
    removeOnComplete: unknown,
    token: string,
    fetchNext?: boolean,
  ): unknown[];
  moveToFinishedArgs(
    job: Job,
    val: unknown,
    propVal: 'returnvalue',
    shouldRemove: unknown,
    target: 'completed',
    token: string,
    timestamp: number,
    fetchNext: boolean,
    fieldsToUpdate: Record<string, string>,
  ): unknown[];
}

/**
 * BullMQ's completion, made requeue's in two ways:
 *
 * - **The result serialised once.** A {@link StoredResult} (the handler's
 *   value, serialised by `storableResult`) is stored as its `json`, verbatim:
 *   BullMQ's own `moveToCompleted` would serialise the value again, and a
 *   value that serialises once but not twice would fail the completion and
 *   land in BullMQ's failed set.
 * - **State with the completion.** A job that has state to store
 *   (`finalStateOf`) has it written by BullMQ's `moveToFinished` as
 *   `fieldsToUpdate`, after its lock check, in the same script.
 */
export function wrapCompletion(
  backend: CompletionBackend,
  finalStateOf: (job: Job) => string | undefined,
): void {
  const completedArgs = backend.moveToCompletedArgs.bind(backend);
  backend.moveToCompletedArgs = (job, returnvalue, removeOnComplete, token, fetchNext = false) => {
    const args = completedArgs(job, returnvalue, removeOnComplete, token, fetchNext);
    const rq = finalStateOf(job);
    if (rq === undefined) return args;
    // The same arguments with `fieldsToUpdate`, at the finish time BullMQ chose (ARGV[2]).
    const finishedOn = args[backend.moveToFinishedKeys.length + 1] as number;
    return backend.moveToFinishedArgs(
      job,
      returnvalue,
      'returnvalue',
      removeOnComplete,
      'completed',
      token,
      finishedOn,
      fetchNext,
      { rq },
    );
  };
  const completed = backend.moveToCompleted.bind(backend);
  // Not an async function: most results are not a StoredResult (nothing, or a
  // plain string or number), and BullMQ's own call is then the only frame.
  backend.moveToCompleted = (job, returnValue, removeOnComplete, token, fetchNext) =>
    returnValue instanceof StoredResult
      ? completeStored(backend, job, returnValue, removeOnComplete, token, fetchNext)
      : completed(job, returnValue, removeOnComplete, token, fetchNext);
}

/** BullMQ's `moveToCompleted` with the result's one serialisation, stored verbatim. */
async function completeStored(
  backend: CompletionBackend,
  job: Job,
  returnValue: StoredResult,
  removeOnComplete: unknown,
  token: string,
  fetchNext: boolean | undefined,
): Promise<{ result: unknown; finishedOn: number }> {
  const args = backend.moveToCompletedArgs(
    job,
    returnValue.json,
    removeOnComplete,
    token,
    fetchNext,
  );
  const result = await backend.moveToFinished(String(job.id), args);
  return { result, finishedOn: args[backend.moveToFinishedKeys.length + 1] as number };
}
