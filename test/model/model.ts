/**
 * The model: what the suite knows for certain about each logical job (one
 * add that created a job), independent of what the system says about itself.
 */
import type { RunConfig } from './system.js';
import type { Outcome } from './protocol.js';

/** One add that created a job, followed through replays, renames and removals. */
export interface LogicalJob {
  seq: number;
  key: string | undefined;
  plan: Outcome[][];
  /** Every id it has had (a replay under a taken id renames it). */
  ids: Set<string>;
  /** The index of the command that added it. */
  addedAt: number;
  /** How many of its deaths the model saw replayed (each starts a new life). */
  replays: number;
  /** Child crashes and Redis restarts that may have cut one of its attempts short. */
  hits: number;
  /** False once a crash or Redis restart happened after it was added. */
  calm: boolean;
  /** The add's reply was lost: the job may exist once or not at all. */
  uncertain: boolean;
  /** Removed by an operator on purpose. */
  removed?: 'purged' | 'trimmed';
  /** A dead record of another job carries its history (a re-added key that died again). */
  mergedInto?: number;
  /** Death identities the model saw in the DLQ. */
  deaths: Set<string>;
}

/** An operator removal whose filter may also have caught deaths the model did not see first. */
export interface Removal {
  kind: 'purge' | 'trim';
  at: number;
  reason?: string;
  ids?: Set<string>;
}

export class Model {
  readonly jobs = new Map<number, LogicalJob>();
  nextSeq = 1;
  /** How many commands have run (a command's index is this when it starts). */
  step = 0;
  breakerOpen = false;
  /** A child crash or Redis restart has happened in this run (events may be missing). */
  disturbedYet = false;
  /** Deaths an operator has taken (replayed or removed), by identity. */
  readonly attributed = new Set<string>();
  readonly removals: Removal[] = [];
  /** Violations found while commands ran (operator results, status reads that wrote). */
  readonly violations: string[] = [];
  /** Observations worth reporting that are not violations. */
  readonly notes: string[] = [];

  constructor(readonly config: RunConfig) {}

  add(seq: number, key: string | undefined, plan: Outcome[][], id: string, uncertain = false) {
    this.jobs.set(seq, {
      seq,
      key,
      plan,
      ids: new Set([id]),
      addedAt: this.step,
      replays: 0,
      hits: 0,
      calm: true,
      uncertain,
      deaths: new Set(),
    });
  }

  /** A child crash (hitting `hit`) or a Redis restart (hitting every job). */
  disturbed(hit: Set<number> | 'all'): void {
    this.disturbedYet = true;
    for (const job of this.jobs.values()) {
      job.calm = false;
      if (hit === 'all' || hit.has(job.seq)) job.hits += 1;
    }
  }

  /** The logical job a dead record belongs to (by its payload), if the model knows it. */
  byRecord(record: { data?: unknown }): LogicalJob | undefined {
    const seq = (record.data as { seq?: unknown } | undefined)?.seq;
    return typeof seq === 'number' ? this.jobs.get(seq) : undefined;
  }
}
