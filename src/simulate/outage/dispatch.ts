import { admits, initialLimitState, nextLimit, type LimitState } from '../../policy/limit/aimd.js';
import type { AdaptiveConcurrency } from '../../policy/limit/limit-options.js';

/**
 * What `--protect` adds to the fleet's breaker and budget: the workers'
 * adaptive limit (`src/policy/limit/aimd.ts`, the very function the fleet's
 * limit scripts follow) on the attempts in flight to the dependency (one key
 * here), and due retries served before first tries while both wait for a slot.
 */
export interface OutageProtection {
  limit: AdaptiveConcurrency;
  /**
   * Of the attempts started while both retries and first tries wait, the
   * share retries take (new work is never starved). @defaultValue `0.8`
   */
  retryShare: number;
}

/** {@link OutageProtection.retryShare}'s default. */
export const defaultRetryShare = 0.8;

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
  private state: LimitState;
  private inFlight = 0;
  private retryCredit: number;
  private readonly retries = new ClientFifo();
  private readonly fresh = new ClientFifo();
  /** The highest limit reached. */
  peakLimit: number;

  constructor(private readonly options: OutageProtection) {
    this.state = initialLimitState(options.limit);
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
    if (this.inFlight >= admits(this.state.limit, this.options.limit)) return -1;
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

  /** The attempt sent at `startedAt` was answered at `now`. */
  succeeded(startedAt: number, now: number): void {
    this.learn('success', startedAt, now);
    if (this.state.limit > this.peakLimit) this.peakLimit = this.state.limit;
  }

  /** The attempt sent at `startedAt` timed out at `now`: overload, as the workers count a timeout. */
  failed(startedAt: number, now: number): void {
    this.learn('overload', startedAt, now);
  }

  private learn(signal: 'success' | 'overload', startedAt: number, now: number): void {
    const sample = { signal, latencyMs: now - startedAt, inFlight: this.inFlight, startedAt, now };
    this.state = nextLimit(this.state, sample, this.options.limit);
    this.inFlight--;
  }
}
