/**
 * What the model suite (test/model/) and its child worker
 * (test/fixtures/model-worker.ts) agree on: the job payload that carries a
 * handler plan, and the Redis keys the child reports through. The keys sit
 * outside requeue's prefix on purpose: the suite's Redis is private and is
 * flushed between runs.
 */

/** What the handler does on one attempt. */
export const outcomes = [
  /** Returns a small JSON value. */
  'ok',
  /** Throws an error with status 503 (retryable). */
  'retry',
  /** Throws a `PermanentError`. */
  'permanent',
  /** Throws an error with status 400 (permanent to the classifier). */
  'permanent-status',
  /** Throws an object whose property getters throw. */
  'throw-getters',
  /** Throws `null`. */
  'throw-null',
  /** Throws `undefined`. */
  'throw-undefined',
  /** Throws a Symbol. */
  'throw-symbol',
  /** Returns a BigInt (cannot be stored as JSON). */
  'result-bigint',
  /** Returns a circular object (cannot be stored as JSON). */
  'result-circular',
  /** Annotates with a BigInt and a circular value, then fails (retryable). */
  'annotate-fail',
  /** Annotates with a BigInt and a circular value, then succeeds. */
  'annotate-ok',
  /** Never settles; the worker's `attemptTimeoutMs` turns it into a failed attempt. */
  'hang',
] as const;
export type Outcome = (typeof outcomes)[number];

/** The payload of every job the model adds. */
export interface ModelJobData {
  /** The model's number for the add that created this job (unique per run). */
  seq: number;
  /** `plan[life][attempt - 1]`: what each attempt of each life (0 = before any replay) does. */
  plan: Outcome[][];
  /** The job's dispatch key, when it has one (the worker's bulkhead key with `KEY_SLOTS`). */
  dispatch?: string;
}

/** The outcome an attempt takes: the last entry stands for every later one. */
export function outcomeOf(data: ModelJobData, life: number, attempt: number): Outcome {
  const lives = data.plan.length > 0 ? data.plan : [['ok' as Outcome]];
  const steps = lives[Math.min(life, lives.length - 1)]!;
  return steps[Math.min(Math.max(attempt, 1), steps.length) - 1] ?? 'ok';
}

/** One handler execution as the child records it, before acting. */
export interface RunEntry {
  /** Unique per execution: the set stays exact if a command is re-sent after a reconnect. */
  run: string;
  seq: number;
  id: string;
  key: string | null;
  attempt: number;
  replays: number | null;
  pid: number;
  outcome: Outcome;
}

/** One `job:dead-lettered` event or `onDead` call as the child records it. */
export interface DeathEntry {
  /** Unique per emission (see {@link RunEntry.run}). */
  uid: string;
  kind: 'event' | 'onDead';
  id: string;
  seq: number | null;
  /** The record's generation when it has one, else its `deadAt`. */
  death: string;
  reason: string;
  /** The record's `replays`: which life of the job died. */
  replays?: number;
  pid: number;
}

/** Redis keys of one model run, by queue. */
export function modelKeys(queue: string) {
  return {
    /** Set of {@link RunEntry} JSON. */
    runs: `model:${queue}:runs`,
    /** Set of {@link DeathEntry} JSON. */
    deaths: `model:${queue}:deaths`,
  };
}

/** The identity of one death of a job: its id and generation (or `deadAt` where there is none). */
export function deathIdentity(record: { id: string; deadAt: number; gen?: unknown }): string {
  const gen = record.gen;
  const known = typeof gen === 'string' || typeof gen === 'number';
  return `${record.id}#${known ? `g${gen}` : `d${record.deadAt}`}`;
}
