import { EventEmitter } from 'node:events';
import type { DeadJobRecord } from './dead-letter.js';
import type { AttemptRecord } from './job-state.js';

/** The events a requeue worker emits, by name. */
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
  'job:dead-lettered': [event: { queue: string; jobId: string; record: DeadJobRecord }];
  'job:completed': [event: { queue: string; jobId: string; attempt: number; result: unknown }];
  'job:deferred': [event: { queue: string; jobId: string; untilMs: number; key: string }];
  'breaker:opened': [event: { queue: string; key: string; halfOpenAt: number }];
  'breaker:half-open': [event: { queue: string; key: string }];
  'breaker:closed': [event: { queue: string; key: string }];
  'budget:exhausted': [
    event: { queue: string; jobId: string; action: 'delay-to-cap' | 'dead-letter' },
  ];
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
}
