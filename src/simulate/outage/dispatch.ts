import { limits } from '../../policy/limits.js';
import {
  parseConcurrencyLimit,
  type ConcurrencyLimitOptions,
} from '../../policy/limit/gradient-options.js';
import { initialGradient, nextGradient, type GradientState } from '../../policy/limit/gradient.js';

/**
 * What `--protect` adds to the fleet's breaker and budget: the worker's
 * concurrency limit learned from latency (`concurrencyLimit`, on by
 * default: the workers' own gradient rule, `src/policy/limit/gradient.ts`),
 * and due retries served before first tries while both wait for a slot.
 */
export interface OutageProtection {
  limit: ConcurrencyLimitOptions;
  /** The worker's `concurrency`: the limit's ceiling. */
  concurrency: number;
  /**
   * Of the attempts started while both retries and first tries wait, the
   * share retries take (new work is never starved). @defaultValue `0.5` (the worker's `retryShare`)
   */
  retryShare: number;
}

/** {@link OutageProtection.retryShare}'s default: the worker's. */
export const defaultRetryShare = 0.5;

/**
 * The protections a worker has without being asked, for `clients` clients
 * served by one worker whose `concurrency` lets every client wait at once
 * (at most 1,000, the bound on `concurrency`): its default concurrency
 * limit and retry share.
 */
export function defaultOutageProtection(clients: number): OutageProtection {
  return {
    limit: parseConcurrencyLimit({}),
    concurrency: Math.min(limits.concurrency, clients),
    retryShare: defaultRetryShare,
  };
}

/** A growable FIFO of client indexes. */
class ClientFifo {
  private items = new Int32Array(256);
  private head = 0;
  length = 0;

  push(client: number): void {
    if (this.length === this.items.length) {
      const next = new Int32Array(2 * this.items.length);
      for (let k = 0; k < this.length; k++)
        next[k] = this.items[(this.head + k) % this.items.length]!;
      this.items = next;
      this.head = 0;
    }
    this.items[(this.head + this.length) % this.items.length] = client;
    this.length++;
  }

  shift(): number {
    const client = this.items[this.head]!;
    this.head = (this.head + 1) % this.items.length;
    this.length--;
    return client;
  }
}

/**
 * The slots of the fleet's adaptive limit and the clients waiting for one:
 * retries and first tries in two queues, retries first up to `retryShare`.
 */
export class SlotDispatch {
  private state: GradientState;
  private inFlight = 0;
  private retryCredit: number;
  private readonly retries = new ClientFifo();
  private readonly fresh = new ClientFifo();
  /** The highest limit reached. */
  peakLimit: number;

  constructor(private readonly options: OutageProtection) {
    this.state = initialGradient(options.limit, options.concurrency);
    // So that the first start, when both wait, is a retry.
    this.retryCredit = 1 - options.retryShare;
    this.peakLimit = this.state.limit;
  }

  /** The client waits for a slot (behind those already waiting). */
  wait(client: number, retry: boolean): void {
    (retry ? this.retries : this.fresh).push(client);
  }

  /** The next client whose attempt may start now, or -1: a slot is free and someone waits. */
  next(): number {
    if (this.inFlight >= Math.floor(this.state.limit)) return -1;
    const retries = this.retries.length > 0;
    const fresh = this.fresh.length > 0;
    if (!retries && !fresh) return -1;
    if (retries && fresh) {
      this.retryCredit += this.options.retryShare;
      if (this.retryCredit >= 1) {
        this.retryCredit -= 1;
        return this.retries.shift();
      }
      return this.fresh.shift();
    }
    return retries ? this.retries.shift() : this.fresh.shift();
  }

  /** An attempt starts: it holds a slot until {@link succeeded} or {@link failed}. */
  started(): void {
    this.inFlight++;
  }

  succeeded(latencyMs: number, now: number): void {
    this.learn('success', latencyMs, now);
  }

  /** A timeout: overload, whatever its latency. */
  failed(latencyMs: number, now: number): void {
    this.learn('overload', latencyMs, now);
  }

  private learn(signal: 'success' | 'overload', latencyMs: number, now: number): void {
    const { limit, concurrency } = this.options;
    const sample = { signal, latencyMs, inFlight: this.inFlight, now };
    this.state = nextGradient(this.state, sample, limit, concurrency);
    this.inFlight--;
    if (this.state.limit > this.peakLimit) this.peakLimit = this.state.limit;
  }
}
