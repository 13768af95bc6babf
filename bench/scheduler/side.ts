import type { Redis } from 'ioredis';
import type { MetricId, ScenarioId } from './scenarios.js';

/** Everything one timed run needs. */
export interface RunContext {
  scenario: ScenarioId;
  /** A queue name no other run uses; the caller deletes its keys afterwards. */
  queueName: string;
  jobs: number;
  concurrency: number;
  /** This run's own connection; the side must not close it. */
  connection: Redis;
  timeoutMs: number;
  /** requeue's worker options under test (`--concurrency-limit`, `--retry-order`). */
  requeue: { concurrencyLimit: 'on' | 'off'; retryOrder: 'first' | 'fifo' };
  /** Brackets each timed part of the run (e.g. to count Redis commands). */
  probe: (metric: MetricId) => Probe;
}

/** Hooks around the timed window of a run. */
export interface Probe {
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** Jobs handled and the wall time they took. */
export interface Timed {
  jobs: number;
  elapsedMs: number;
}

/** What a run measured, by results row. */
export type RunResult = Partial<Record<MetricId, Timed>>;

/** One of the two systems under comparison. */
export interface Side {
  readonly label: string;
  run(ctx: RunContext): Promise<RunResult>;
}

/** Jobs are pre-loaded in chunks of this many, one round trip each. */
export const loadChunk = 1_000;

/** `[0, n)` in chunks of at most `size`. */
export function* chunks(n: number, size = loadChunk): Generator<number[]> {
  for (let start = 0; start < n; start += size) {
    yield Array.from({ length: Math.min(size, n - start) }, (_, i) => start + i);
  }
}
