/**
 * BullMQ's key layout (`bull:<queue>:…`, a job hash per id, `<job>:lock`)
 * and its delayed-score encoding, as BullMQ 6.7 writes them.
 * `test/integration/job-moves.test.ts` fails loudly if an upgrade changes them.
 */

/** The keys of a BullMQ queue requeue uses. */
export interface BullKeys {
  /** `bull:<queue>:` — a job's hash is this plus its id. */
  readonly prefix: string;
  readonly active: string;
  readonly wait: string;
  readonly stalled: string;
  readonly meta: string;
  readonly marker: string;
  readonly events: string;
  /** Sorted set of delayed jobs, scored {@link delayedScore}. */
  readonly delayed: string;
  readonly prioritized: string;
  /** BullMQ's priority counter: a prioritized job's score is priority × 2^32 + its next value. */
  readonly pc: string;
  readonly completed: string;
  readonly failed: string;
}

/** BullMQ's key layout for queue `name` (prefix `bull`). */
export function bullKeys(name: string, prefix = 'bull'): BullKeys {
  const base = `${prefix}:${name}:`;
  return {
    prefix: base,
    active: `${base}active`,
    wait: `${base}wait`,
    stalled: `${base}stalled`,
    meta: `${base}meta`,
    marker: `${base}marker`,
    events: `${base}events`,
    delayed: `${base}delayed`,
    prioritized: `${base}prioritized`,
    pc: `${base}pc`,
    completed: `${base}completed`,
    failed: `${base}failed`,
  };
}

/**
 * BullMQ 6.7 scores a delayed job `dueAtMs * 0x1000 + n`, where n (< 4096)
 * orders jobs due in the same millisecond (`includes/getDelayedScore.lua`).
 */
const delayedScoreFactor = 0x1000;

/** The lowest delayed score of a job due at `dueAtMs`. */
export function delayedScore(dueAtMs: number): number {
  return Math.floor(dueAtMs) * delayedScoreFactor;
}

/**
 * The highest delayed score BullMQ's promotion at `now` takes: `(now + 1) *
 * 0x1000 - 1`, `now` as given (a fraction too), `includes/promoteDelayedJobs.lua`.
 */
export function dueScoreBound(now: number): number {
  return (now + 1) * delayedScoreFactor - 1;
}

/** When a delayed job whose score is `score` is due (ms since epoch). */
export function delayedDueAt(score: number): number {
  return Math.floor(score / delayedScoreFactor);
}
