/** The handler's view of one attempt, and what it asks of requeue during it. */
import type { Job } from 'bullmq';
import type { AttemptRecord, JobMeta } from '../../policy/job-state.js';
import type { AttemptContext, RequeueJob } from './context.js';

/**
 * The handler's view of one attempt (a {@link RequeueJob}), and what the
 * handler tells requeue during it. A class rather than an object literal:
 * one per job, so its shape is built once. Its methods use `this`, like
 * BullMQ's own `Job`.
 */
export class AttemptHandle<T> implements RequeueJob<T> {
  readonly id: string;
  readonly name: string;
  readonly queue: string;
  readonly idempotencyKey: string | undefined;
  readonly tags: Readonly<Record<string, string>>;
  #details: Record<string, unknown> | undefined = undefined;
  #pauseUntil: number | undefined = undefined;
  // The job's AbortController is made when something needs it (the handler
  // reads `signal`, or the attempt times out): most attempts never do.
  #controller: AbortController | undefined = undefined;
  #untrack: (() => void) | undefined = undefined;
  readonly #track: (controller: AbortController) => () => void;

  constructor(
    ctx: AttemptContext<T>,
    readonly bullJob: Job,
    readonly data: T,
    meta: JobMeta,
    readonly attempt: number,
    readonly replays: number,
    readonly history: readonly AttemptRecord[],
  ) {
    this.id = String(bullJob.id);
    this.name = bullJob.name;
    this.queue = ctx.queue;
    this.idempotencyKey = meta.key;
    this.tags = meta.tags ?? noTags;
    this.#track = ctx.track;
  }

  get signal(): AbortSignal {
    return this.abortable().signal;
  }

  annotate(extra: Record<string, unknown>): void {
    // A new object each time (what was stored stays as it was), built with
    // Object.assign: a spread copy that adds fields is slow on Node 20.
    const merged: Record<string, unknown> = Object.assign({}, this.#details);
    try {
      Object.assign(merged, extra);
    } catch {
      merged['annotateError'] = 'annotate() needs an object';
    }
    this.#details = merged;
  }

  pauseKey(untilMs: number): void {
    if (Number.isFinite(untilMs)) this.#pauseUntil = Math.max(this.#pauseUntil ?? 0, untilMs);
  }

  /** The attempt's controller, made (and registered with the worker) on first use. */
  abortable(): AbortController {
    if (!this.#controller) {
      this.#controller = new AbortController();
      this.#untrack = this.#track(this.#controller);
    }
    return this.#controller;
  }

  /** The attempt is over: closing the worker no longer needs to abort it. */
  forget(): void {
    this.#untrack?.();
  }

  static detailsOf<T>(handle: AttemptHandle<T>): Record<string, unknown> | undefined {
    return handle.#details;
  }

  static pauseUntilOf<T>(handle: AttemptHandle<T>): number | undefined {
    return handle.#pauseUntil;
  }
}

const noTags: Readonly<Record<string, string>> = Object.freeze({});
