/**
 * Writes the delivery log from a webhook worker: the handler notes what each
 * attempt saw, and the worker's events — which come only after the job's
 * move is stored — turn the note into an entry with where the delivery went.
 * A write that fails is logged and counted, never awaited by the move: the
 * log can never change a delivery's fate (promise 4).
 */
import type { Logger } from '../../src/config/logger.js';
import type { AttemptRecord } from '../../src/policy/job-state.js';
import { RetentionKeeper } from '../../src/scheduler/dlq/retention-keeper.js';
import type { TypedEmitter, WorkerEvents } from '../../src/scheduler/events.js';
import type { Clock } from '../../src/util/system.js';
import { capBytes, capError, type DeliveryOutcome } from './delivery-log-entry.js';
import type { RedisClient } from '../../src/redis/connection.js';
import {
  DeliveryLog,
  type DeliveryLogOptionsInput,
  type NewDeliveryLogEntry,
} from './delivery-log.js';
import type { DeliveryDetails } from './delivery-types.js';

/** Notes kept at most, per worker: a note whose move never came (a lost lock) is dropped oldest first. */
const maxNotes = 10_000;

interface Note {
  at: number;
  attempt: number;
  messageId: string;
  eventType: string;
  endpointId: string;
  details: DeliveryDetails;
}

/** One worker's writer of its queue's delivery log. */
export class DeliveryLogRecorder {
  private readonly notes = new Map<string, Note>();
  private readonly keeper: RetentionKeeper;
  /** Writes that failed (Redis down): the deliveries went on. */
  failedWrites = 0;
  private readonly writing = new Set<Promise<void>>();

  constructor(
    readonly log: DeliveryLog,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {
    this.keeper = new RetentionKeeper({
      pass: (signal) => log.retentionPass(signal),
      clock,
      logger,
      intervalMs: log.options.intervalMs,
    });
  }

  /** What one attempt saw (called by the handler as the attempt ends). */
  note(
    jobId: string,
    attempt: number,
    job: { event: { id: string; type: string }; endpoint: { id: string } },
    details: DeliveryDetails,
  ): void {
    if (this.notes.size >= maxNotes) this.notes.delete(this.notes.keys().next().value!);
    this.notes.set(jobId, {
      at: this.clock.now() - details.latencyMs,
      attempt,
      messageId: job.event.id,
      eventType: job.event.type,
      endpointId: job.endpoint.id,
      details,
    });
  }

  /** Listens to `worker`'s events and starts the retention keeper. */
  attach(w: TypedEmitter<WorkerEvents>): void {
    w.on('job:completed', (e) => this.record(e.jobId, 'delivered', undefined));
    w.on('retry:scheduled', (e) =>
      this.record(e.jobId, 'retrying', e.record, { retryAt: e.retryAt }),
    );
    w.on('job:dead-lettered', (e) =>
      this.record(e.jobId, 'dead', e.record.history.at(-1), {
        deadReason: e.record.reason,
        error: e.record.message,
      }),
    );
    this.keeper.start();
  }

  /** Stops the keeper and waits for the writes in flight (callers bound the wait). */
  async close(): Promise<void> {
    await Promise.all([this.keeper.stop(), ...this.writing]);
  }

  private record(
    jobId: string,
    outcome: DeliveryOutcome,
    attempt: AttemptRecord | undefined,
    extra: { retryAt?: number; deadReason?: string; error?: string } = {},
  ): void {
    const note = this.notes.get(jobId);
    // No note: the job never reached the endpoint (disabled, refused input).
    if (!note) return;
    this.notes.delete(jobId);
    const { details } = note;
    const error = extra.error ?? attempt?.error?.message;
    const entry: NewDeliveryLogEntry = {
      at: note.at,
      messageId: note.messageId,
      eventType: note.eventType,
      endpointId: note.endpointId,
      jobId,
      attempt: note.attempt,
      outcome,
      latencyMs: details.latencyMs,
      ...(details.status !== undefined && { status: details.status }),
      ...(details.code !== undefined && { code: details.code }),
      ...(attempt?.classification !== undefined &&
        outcome !== 'delivered' && { reason: attempt.classification }),
      ...(extra.deadReason !== undefined && { deadReason: extra.deadReason }),
      ...(details.body !== undefined &&
        details.body !== '' && { excerpt: capBytes(details.body, this.log.options.excerptBytes) }),
      ...(error !== undefined && outcome !== 'delivered' && { error: capError(error) }),
      ...(extra.retryAt !== undefined && { retryAt: extra.retryAt }),
    };
    const write = this.log.write(entry).then(
      () => undefined,
      (err: unknown) => {
        this.failedWrites++;
        this.logger.warn(
          { err, jobId },
          'could not write the delivery log; the delivery is unchanged',
        );
      },
    );
    this.writing.add(write);
    void write.finally(() => this.writing.delete(write));
  }
}

/** The recorder a webhook worker's `deliveryLog` option asks for, or none for `false`. */
export function deliveryLogRecorder(
  option: DeliveryLogOptionsInput | DeliveryLog | false | undefined,
  redis: RedisClient,
  queue: string,
  clock: Clock,
  logger: Logger,
): DeliveryLogRecorder | undefined {
  if (option === false) return undefined;
  const log =
    option instanceof DeliveryLog ? option : new DeliveryLog(redis, queue, option, { clock });
  return new DeliveryLogRecorder(log, clock, logger);
}
