import type { Worker } from 'bullmq';
import type { TypedEmitter, WorkerEvents } from '../../src/scheduler/events.js';

/** What the log listens to: a requeue worker (any payload type) and its BullMQ worker. */
type ObservedWorker = TypedEmitter<WorkerEvents> & { readonly bull: Worker };

/** The events a {@link WorkerEventLog} records, with their payloads. */
export interface RecordedEvents {
  'retry:scheduled': WorkerEvents['retry:scheduled'][0];
  'job:dead-lettered': WorkerEvents['job:dead-lettered'][0];
  'job:completed': WorkerEvents['job:completed'][0];
  /** BullMQ's own `failed`: the job has left the active list (a dead job is then gone). */
  'bull:failed': { jobId: string; reason: string };
}

type Name = keyof RecordedEvents;

interface Waiter {
  event: Name;
  match: (payload: never) => boolean;
  count: number;
  resolve: (payloads: unknown[]) => void;
}

/**
 * Records a worker's events from the moment it is created, so a test can wait
 * for an event that may already have happened: no listener registered too
 * late, and no sleeping on luck.
 */
export class WorkerEventLog {
  private readonly seen: { [K in Name]: RecordedEvents[K][] } = {
    'retry:scheduled': [],
    'job:dead-lettered': [],
    'job:completed': [],
    'bull:failed': [],
  };
  private readonly waiters = new Set<Waiter>();

  constructor(w: ObservedWorker) {
    w.on('retry:scheduled', (e) => this.push('retry:scheduled', e));
    w.on('job:dead-lettered', (e) => this.push('job:dead-lettered', e));
    w.on('job:completed', (e) => this.push('job:completed', e));
    w.bull.on('failed', (job, err) => {
      if (job) this.push('bull:failed', { jobId: String(job.id), reason: err.message });
    });
  }

  /** Every payload of `event` seen so far. */
  all<K extends Name>(event: K): RecordedEvents[K][] {
    return [...this.list(event)];
  }

  /** Resolves with the first payload of `event` that matches, past or future. */
  async waitFor<K extends Name>(
    event: K,
    match: (payload: RecordedEvents[K]) => boolean = () => true,
    timeoutMs = 20_000,
  ): Promise<RecordedEvents[K]> {
    const [first] = await this.waitForCount(event, 1, match, timeoutMs);
    return first!;
  }

  /** Resolves with the first `count` payloads of `event` that match, past or future. */
  waitForCount<K extends Name>(
    event: K,
    count: number,
    match: (payload: RecordedEvents[K]) => boolean = () => true,
    timeoutMs = 20_000,
  ): Promise<RecordedEvents[K][]> {
    const already = this.list(event).filter(match);
    if (already.length >= count) return Promise.resolve(already.slice(0, count));
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        event,
        match: match as (payload: never) => boolean,
        count,
        resolve: (payloads) => {
          clearTimeout(timer);
          resolve(payloads as RecordedEvents[K][]);
        },
      };
      const timer = setTimeout(() => {
        this.waiters.delete(waiter);
        const got = this.list(event).filter(match).length;
        reject(new Error(`waited ${timeoutMs} ms for ${count} "${event}" events; saw ${got}`));
      }, timeoutMs);
      this.waiters.add(waiter);
    });
  }

  private list<K extends Name>(event: K): RecordedEvents[K][] {
    return this.seen[event] as RecordedEvents[K][];
  }

  private push<K extends Name>(event: K, payload: RecordedEvents[K]): void {
    this.list(event).push(payload);
    for (const waiter of [...this.waiters]) {
      if (waiter.event !== event) continue;
      const matching = this.list(event).filter(waiter.match as (p: RecordedEvents[K]) => boolean);
      if (matching.length >= waiter.count) {
        this.waiters.delete(waiter);
        waiter.resolve(matching.slice(0, waiter.count));
      }
    }
  }
}

/** A promise with its resolve function outside: a gate a handler can wait on. */
export function gate<T = void>(): { promise: Promise<T>; open: (value: T) => void } {
  let open!: (value: T) => void;
  const promise = new Promise<T>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}
