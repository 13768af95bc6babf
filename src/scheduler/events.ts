import { EventEmitter } from 'node:events';
import type { Logger } from '../config/logger.js';
import type { AttemptRecord } from '../policy/job-state.js';
import type { DeadJobRecord } from './dlq/dead-letter-queue.js';

/** The events a requeue worker emits, by name. Each comes after the state it announces is stored. */
export interface WorkerEvents {
  'retry:scheduled': [
    event: {
      queue: string;
      jobId: string;
      attempt: number;
      delayMs: number;
      retryAt: number;
      record: AttemptRecord;
    },
  ];
  /** One per death; `record.gen` identifies the death (dedupe on it). */
  'job:dead-lettered': [event: { queue: string; jobId: string; record: DeadJobRecord }];
  'job:completed': [
    event: {
      queue: string;
      jobId: string;
      attempt: number;
      result: unknown;
      /** When the job was added (or replayed from the DLQ), ms since the epoch. */
      enqueuedAt: number;
      /** When BullMQ stored it as completed, ms since the epoch. */
      finishedAt: number;
    },
  ];
  /**
   * A job back from a retry or a deferral was taken by this worker (not one
   * a crash interrupted): `startedAt − scheduledAt` is how late it started.
   */
  'retry:started': [
    event: {
      queue: string;
      jobId: string;
      attempt: number;
      scheduledAt: number;
      startedAt: number;
    },
  ];
  /** A job held back without running (no attempt used): by its circuit, its key's pause or bulkhead. */
  'job:deferred': [
    event: {
      queue: string;
      jobId: string;
      untilMs: number;
      key: string;
      reason: 'breaker' | 'pause' | 'bulkhead' | 'rate-limit';
    },
  ];
  'breaker:opened': [event: { queue: string; key: string; halfOpenAt: number }];
  'breaker:half-open': [event: { queue: string; key: string }];
  'breaker:closed': [event: { queue: string; key: string }];
  'budget:exhausted': [
    event: { queue: string; jobId: string; action: 'delay' | 'delay-to-cap' | 'dead-letter' },
  ];
  /**
   * A webhook endpoint was disabled by the worker (stored first): a 410
   * (`gone`) or deliveries that all failed for auto-disable's `afterMs`
   * (`failing`). Hook an owner's notification here.
   */
  'endpoint:disabled': [
    event: {
      queue: string;
      endpointId: string;
      reason: string;
      cause: 'gone' | 'failing';
      disabledAt: number;
      /** When its failing streak began, for `failing`. */
      failingSince?: number;
    },
  ];
  /** DLQ retention removed dead jobs (also logged as a warning). */
  'dlq:trimmed': [event: { queue: string; byAge: number; byCount: number }];
  /** An error requeue could not hand to anyone else (lost connection, lost lock). */
  error: [error: Error];
}

/** An EventEmitter whose `on`/`emit` know {@link WorkerEvents}. */
export class TypedEmitter<E extends { [K in keyof E]: unknown[] }> extends EventEmitter {
  override on<K extends keyof E & string>(event: K, listener: (...args: E[K]) => void): this {
    return super.on(event, listener as (...args: unknown[]) => void);
  }

  override once<K extends keyof E & string>(event: K, listener: (...args: E[K]) => void): this {
    return super.once(event, listener as (...args: unknown[]) => void);
  }

  override off<K extends keyof E & string>(event: K, listener: (...args: E[K]) => void): this {
    return super.off(event, listener as (...args: unknown[]) => void);
  }

  override emit<K extends keyof E & string>(event: K, ...args: E[K]): boolean {
    return super.emit(event, ...args);
  }

  /**
   * Calls every listener of `event`, each on its own: a listener that throws
   * (or returns a promise that rejects) is logged and the others still run.
   * Nothing a listener does reaches the caller, so no listener can change a
   * job's fate. (graphile-worker's `safeEmit`.)
   */
  safeEmit<K extends keyof E & string>(logger: Logger, event: K, ...args: E[K]): void {
    if (this.listenerCount(event) === 0) return;
    for (const listener of this.rawListeners(event)) {
      try {
        const returned = (listener as (...a: unknown[]) => unknown).apply(this, args);
        // Any thenable, not only this realm's Promise: a rejection must never go unhandled.
        if (isThenable(returned))
          returned.then(undefined, (err: unknown) => listenerFailed(logger, event, err));
      } catch (err) {
        listenerFailed(logger, event, err);
      }
    }
  }
}

/** Logs a listener's throw or rejection (a function apart: no closure per event emitted). */
function listenerFailed(logger: Logger, event: string, err: unknown): void {
  logger.error({ err, event }, 'event listener failed');
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}
