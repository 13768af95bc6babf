import {
  raw2NextJobData,
  Worker,
  type Job,
  type JobJson,
  type Processor,
  type WorkerOptions as BullWorkerOptions,
} from 'bullmq';
import { wrapCompletion, type CompletionBackend } from './bull-completion.js';
import { assertSupportedBullmq } from './version.js';

/**
 * BullMQ's worker as requeue runs it. Knows of BullMQ's insides: its queue
 * backend's `moveToDelayed` (with `fieldsToUpdate` and `fetchNext`),
 * `execCommand`, `moveToFinished` (replaced by a copy that sees its reply)
 * and `moveToCompleted` (replaced in `bull-completion.ts`), their helpers
 * `raw2NextJobData` and `finishedErrors`, and the worker's `createJob`,
 * `handleFailed`, `updateDelays` and `mainLoopQueue`.
 * `test/integration/job-moves.test.ts` fails loudly if an upgrade changes any of it.
 */

/** requeue's fields of a job hash (`undefined` where absent). */
export interface StateFields {
  rq: string | undefined;
  rql: string | undefined;
  rqo: string | undefined;
  rqm: string | undefined;
}

/**
 * The BullMQ scripts whose reply may carry the next job's whole hash
 * (`HGETALL`), besides `moveToFinished` (see {@link BullWorker}).
 */
const fetchingCommands = new Set(['moveToActive', 'moveToDelayed']);

/** What of BullMQ's queue backend {@link BullWorker} wraps (public in its typings or not). */
interface WrappedBackend extends CompletionBackend {
  /** The worker; its `client` is the connection BullMQ's commands go through. */
  readonly queue: { readonly client: Promise<unknown> };
  execCommand(client: unknown, commandName: string, args: unknown[]): unknown;
  finishedErrors(args: { code: number; jobId: string; command: string; state: string }): Error;
}

/**
 * BullMQ's worker, with three round trips of a retried job folded into BullMQ's
 * own scripts:
 *
 * - **State read with the fetch.** BullMQ's fetch (`moveToActive`, or the
 *   fetch-next of `moveToFinished`/`moveToDelayed`) replies with the job's
 *   whole hash, requeue's fields included, but BullMQ keeps only its own. The
 *   backend's `execCommand` (and, for completions, its `moveToFinished`) is
 *   wrapped to keep requeue's fields of a fetched job until `createJob` makes
 *   the job, which {@link JobMoves.load} then
 *   reads instead of an `HMGET`. A job the capture missed is read as before.
 * - **Success record with the completion.** A completion that changes the
 *   job's state (a success after retries) passes it as BullMQ's
 *   `fieldsToUpdate` of `moveToFinished`, which writes it after checking the
 *   lock, in the same script: no separate fenced write first.
 * - **Next job with the retry.** requeue's move to delayed takes the next job
 *   in the same script (BullMQ's `fetchNext` of `moveToDelayed`) when BullMQ
 *   would fetch one after this job (the test of its `fetchNextCallback`, on
 *   its `mainLoopQueue`), and `handleFailed` hands it to BullMQ's loop as
 *   BullMQ's own `moveToFailed` would, instead of a separate `moveToActive`.
 */
export class BullWorker extends Worker {
  /** requeue's fields of jobs fetched, by id, until `createJob` takes them (microseconds). */
  private readonly captured = new Map<string, StateFields>();
  /** requeue's fields of the jobs this worker made. */
  private readonly fetched = new WeakMap<Job, StateFields>();
  /** The serialised state to complete a job with. */
  private readonly finalState = new WeakMap<Job, string>();
  /** The next job, taken by the move of this one (BullMQ's reply: `[job, id, limit delay, delay until]`). */
  private readonly nextOf = new WeakMap<Job, unknown[]>();

  /**
   * `processor` may return a value rather than a promise: BullMQ awaits what
   * it returns (`processJob`), and a synchronous throw there is a failure too.
   * A processor that is not an async function costs no promise of its own.
   */
  constructor(
    name: string,
    processor: ((job: Job, token: string | undefined) => unknown) | null,
    opts: BullWorkerOptions,
  ) {
    assertSupportedBullmq();
    super(name, processor as Processor, opts);
    const backend = this.backend as unknown as WrappedBackend;
    const exec = backend.execCommand.bind(backend);
    backend.execCommand = (client, commandName, commandArgs) => {
      const reply = exec(client, commandName, commandArgs);
      if (!fetchingCommands.has(commandName)) return reply;
      return (reply as Promise<unknown>).then((raw) => {
        this.capture(raw);
        return raw;
      });
    };
    // BullMQ's own `moveToFinished` (a completion, and the next job's fetch),
    // seeing the reply where BullMQ does: every job completes through it, and
    // a wrapped `execCommand` would cost each one a promise more.
    backend.moveToFinished = async (jobId, args) => {
      const client = await backend.queue.client;
      const result = (await exec(client, 'moveToFinished', args)) as unknown;
      if ((result as number) < 0) {
        const code = result as number;
        throw backend.finishedErrors({ code, jobId, command: 'moveToFinished', state: 'active' });
      }
      if (result === undefined) return undefined;
      this.capture(result);
      return raw2NextJobData(result as unknown[]);
    };
    wrapCompletion(backend, (job) => this.finalState.get(job));
  }

  protected override createJob(data: JobJson, jobId: string): Job {
    const job = super.createJob(data, jobId);
    // Most fetched jobs are first attempts: nothing captured, no lookup.
    if (this.captured.size === 0) return job;
    const fields = this.captured.get(jobId);
    if (fields !== undefined) {
      this.captured.delete(jobId);
      this.fetched.set(job, fields);
    }
    return job;
  }

  protected override handleFailed(
    err: Error,
    job: Job,
    token: string,
    fetchNextCallback?: () => boolean,
    span?: Parameters<Worker['handleFailed']>[4],
  ): Promise<Job> {
    const next = this.nextOf.get(job);
    if (next === undefined) return super.handleFailed(err, job, token, fetchNextCallback, span);
    this.nextOf.delete(job);
    const [jobData, jobId, limitDelay, delayUntil] = next as [JobJson, string, number, number];
    (this as unknown as { updateDelays(limit?: number, until?: number): void }).updateDelays(
      limitDelay,
      delayUntil,
    );
    return this.nextJobFromJobData(jobData, jobId, token);
  }

  /**
   * BullMQ's move to delayed (fenced by the lock), taking the next job in the
   * same script when BullMQ would fetch one after this job.
   */
  async moveToDelayed(
    job: Job,
    token: string,
    timestamp: number,
    delayMs: number,
    opts: { skipAttempt: boolean; fieldsToUpdate: Record<string, string | number> },
  ): Promise<void> {
    // BullMQ's own test (its `fetchNextCallback`): its loop holds no more jobs than its concurrency.
    const loop = (this as unknown as { mainLoopQueue: { numTotal(): number } | null })
      .mainLoopQueue;
    const fetchNext =
      loop !== null && loop.numTotal() <= this.concurrency && !(this.closing || this.paused);
    const next = await this.backend.moveToDelayed(String(job.id), timestamp, delayMs, token, {
      skipAttempt: opts.skipAttempt,
      fieldsToUpdate: opts.fieldsToUpdate,
      fetchNext,
    });
    if (fetchNext && Array.isArray(next) && next.length > 0) this.nextOf.set(job, next);
  }

  /**
   * Ends BullMQ's blocking connection (its own duplicate, for the fetch) and
   * only that one: BullMQ's `disconnect()` also ends the connection the worker
   * was given, which may be its caller's.
   */
  disconnectFetch(): Promise<void> {
    return this.backend.disconnectBlocking();
  }

  /** requeue's fields as the fetch of `job` read them, or `undefined` when not captured. */
  fetchedState(job: Job): StateFields | undefined {
    return this.fetched.get(job);
  }

  /** Has BullMQ's completion of `job` write `rq` in the same script. */
  completeWithState(job: Job, rq: string): void {
    this.finalState.set(job, rq);
  }

  /** Keeps requeue's fields of a fetched job (`[hash as a flat array, id, …]`). */
  private capture(raw: unknown): void {
    if (!Array.isArray(raw) || !Array.isArray(raw[0])) return;
    const fields = stateFieldsOf(raw[0] as unknown[]);
    if (fields === undefined) {
      // Never leave an older reply's fields for this id (one that did not become a job).
      if (this.captured.size !== 0) this.captured.delete(String(raw[1]));
      return;
    }
    // Taken by `createJob` at once; a reply that never became a job must not pile up.
    if (this.captured.size >= 10_000) this.captured.clear();
    this.captured.set(String(raw[1]), fields);
  }
}

/** requeue's fields in a job hash given as `[field, value, …]`, or `undefined` when it has none. */
function stateFieldsOf(flat: readonly unknown[]): StateFields | undefined {
  let fields: StateFields | undefined;
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const name = flat[i];
    // Most of the hash is BullMQ's: turned away on its length and first two characters.
    if (!maybeStateField(name)) continue;
    if (name !== 'rq' && name !== 'rql' && name !== 'rqo' && name !== 'rqm') continue;
    fields ??= { rq: undefined, rql: undefined, rqo: undefined, rqm: undefined };
    fields[name] = String(flat[i + 1]);
  }
  return fields;
}

/** Could `name` be one of requeue's fields (`rq…`, at most 3 characters)? Cheaper than 4 comparisons. */
function maybeStateField(name: unknown): boolean {
  return (
    typeof name === 'string' &&
    name.length <= 3 &&
    name.charCodeAt(0) === 114 && // r
    name.charCodeAt(1) === 113 // q
  );
}
