import { z } from 'zod';
import { deadReasons } from '../errors/dead-reason.js';

export { deadReasons, type DeadReason } from '../errors/dead-reason.js';

/**
 * What requeue keeps with each job in Redis, as pure data. Two parts:
 * - {@link JobMeta} in the job's options (`opts.rq`), written once when the
 *   job is added: its policy, its idempotency key, its tags.
 * - {@link JobState} in the job hash's `rq` field, rewritten atomically with
 *   each move (retry, deferral, death): the attempt history and what the
 *   strategy needs (previous delay, first failure). Beside it, two counters
 *   only the replay script changes: `rql`, the job's life (how many times it
 *   was replayed), and `rqo`, BullMQ's started-attempts count when that life
 *   began.
 * Both are validated with zod on the way in and on the way back out.
 */

export const errorSummarySchema = z.object({
  class: z.string(),
  message: z.string(),
  status: z.number().optional(),
  code: z.string().optional(),
});
export type ErrorSummary = z.infer<typeof errorSummarySchema>;

/** One attempt of a job, as kept in its history. */
export const attemptRecordSchema = z.object({
  /** 1-based attempt number within the job's current life (replays start again at 1). */
  attempt: z.number().int(),
  /** How many times the job had been replayed from the DLQ when this attempt ran. */
  replay: z.number().int().optional(),
  startedAt: z.number(),
  finishedAt: z.number().optional(),
  /**
   * What happened: the handler failed, the worker died, the job was held
   * back (breaker, pause, bulkhead), or the handler succeeded.
   */
  outcome: z.enum(['failed', 'stalled', 'deferred', 'succeeded']),
  error: errorSummarySchema.optional(),
  /** The classifier's reason (`http-status`, `network`, …). */
  classification: z.string().optional(),
  decision: z.enum(['retry', 'dead-letter', 'deferred', 'completed']),
  delayMs: z.number().optional(),
  retryAt: z.number().optional(),
  /** `strategy` or `server` (a Retry-After) or `budget` (pushed to the cap). */
  delaySource: z.string().optional(),
  deadReason: z.enum(deadReasons).optional(),
  /** Anything the handler's domain adds: HTTP status, latency, a body snippet. */
  details: z.record(z.string(), z.unknown()).optional(),
});
export type AttemptRecord = z.infer<typeof attemptRecordSchema>;

export const jobStateSchema = z.object({
  v: z.literal(1),
  history: z.array(attemptRecordSchema),
  /** The life the per-life fields below belong to (0 before any replay). */
  life: z.number().int().default(0),
  firstFailedAt: z.number().optional(),
  previousDelayMs: z.number().optional(),
  /** Breaker deferrals in this life: they do not consume attempts. */
  deferrals: z.number().int().default(0),
  /** Tokens the last retry took from the budget: a success gives them back. */
  lastRetryCost: z.number().optional(),
  /** This job's failure its breaker counted (when, and failed attempts since): a success takes it back. */
  breakerStreak: z.object({ failedAt: z.number(), failures: z.number().int().min(1) }).optional(),
});
export type JobState = z.infer<typeof jobStateSchema>;

/** A fresh state for a job that has not failed yet. */
export function emptyJobState(life = 0): JobState {
  return { v: 1, history: [], life, deferrals: 0 };
}

/**
 * The state of every job on its first attempt, shared: states are never
 * changed in place (see {@link changeState}), and frozen, this one cannot be.
 */
const firstLifeState: JobState = Object.freeze({
  v: 1 as const,
  history: Object.freeze([]) as unknown as JobState['history'],
  life: 0,
  deferrals: 0,
});

/**
 * `state` with `changes` applied, built field by field. On Node 20, a copy
 * that adds a field the original lacks (`{ ...state, firstFailedAt }`) costs
 * microseconds: V8 gives each such copy a hidden class of its own. Every
 * failed attempt makes one, so the state is rebuilt explicitly instead.
 */
export function changeState(state: JobState, changes: Partial<JobState>): JobState {
  const next: JobState = {
    v: 1,
    history: changes.history ?? state.history,
    life: changes.life ?? state.life,
    deferrals: changes.deferrals ?? state.deferrals,
  };
  const firstFailedAt = 'firstFailedAt' in changes ? changes.firstFailedAt : state.firstFailedAt;
  if (firstFailedAt !== undefined) next.firstFailedAt = firstFailedAt;
  const previousDelayMs =
    'previousDelayMs' in changes ? changes.previousDelayMs : state.previousDelayMs;
  if (previousDelayMs !== undefined) next.previousDelayMs = previousDelayMs;
  const lastRetryCost = 'lastRetryCost' in changes ? changes.lastRetryCost : state.lastRetryCost;
  if (lastRetryCost !== undefined) next.lastRetryCost = lastRetryCost;
  const breakerStreak = 'breakerStreak' in changes ? changes.breakerStreak : state.breakerStreak;
  if (breakerStreak !== undefined) next.breakerStreak = breakerStreak;
  return next;
}

/**
 * The state a job starts its `life` with: a state stored in an earlier life
 * keeps only its history (replay gives fresh attempts, a fresh time window).
 */
export function stateForLife(stored: JobState | undefined, life: number): JobState {
  if (!stored) return life === 0 ? firstLifeState : emptyJobState(life);
  if (stored.life === life) return stored;
  return changeState(emptyJobState(life), { history: stored.history });
}

export const jobMetaSchema = z.object({
  /** The job's own retry policy, as stored (names and numbers). */
  policy: z.record(z.string(), z.unknown()).optional(),
  /** The idempotency key the producer gave. */
  key: z.string().optional(),
  /** Extra fields a worker kind needs (a stream id, an endpoint id). */
  tags: z.record(z.string(), z.string()).optional(),
});
export type JobMeta = z.infer<typeof jobMetaSchema>;

/** Parses a stored `rq` hash field; a corrupt value gives `undefined` rather than a crash. */
export function parseJobState(raw: string | null | undefined): JobState | undefined {
  if (!raw) return undefined;
  try {
    const parsed = jobStateSchema.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** The meta of a job that has none (shared: meta is only read). */
const noMeta: JobMeta = Object.freeze({});

/** Reads requeue's meta from a job's options; unknown shapes are ignored. */
export function readJobMeta(opts: unknown): JobMeta {
  const rq = (opts as { rq?: unknown } | undefined)?.rq;
  if (rq === undefined) return noMeta;
  if (isPlainMeta(rq)) return rq;
  const parsed = jobMetaSchema.safeParse(rq);
  return parsed.success ? parsed.data : noMeta;
}

/**
 * The common meta — at most a key and string tags — checked by hand: this
 * runs for every job, and zod costs more than the rest of the happy path.
 */
function isPlainMeta(rq: unknown): rq is JobMeta {
  if (typeof rq !== 'object' || rq === null) return false;
  for (const [name, value] of Object.entries(rq)) {
    if (name === 'key') {
      if (typeof value !== 'string') return false;
    } else if (name === 'tags') {
      if (typeof value !== 'object' || value === null) return false;
      if (!Object.values(value).every((v) => typeof v === 'string')) return false;
    } else {
      return false;
    }
  }
  return true;
}

/**
 * Serialises a state for the `rq` field. The type checks it on the way out
 * (the pure functions of `attempt-history.ts` build every state) and zod on
 * the way back in ({@link parseJobState}); validating again here cost about
 * 20 µs per retry or death, a tenth of requeue's CPU per dead job.
 */
export function serializeJobState(state: JobState): string {
  return JSON.stringify(state);
}

/** Why a job waits in the delayed set. */
export type DelayKind = 'retry' | 'deferral' | 'scheduled';

/**
 * Why a delayed job waits, from its state: its last attempt in this `life`
 * failed and was retried (`retry`), or it was held back unsent by a breaker,
 * a pause or a bulkhead (`deferral`); with no such attempt it was added with
 * a delay (`scheduled`).
 */
export function delayKind(state: JobState | undefined, life: number): DelayKind {
  const last = state?.history.at(-1);
  if (!last || (last.replay ?? 0) !== life) return 'scheduled';
  if (last.decision === 'retry') return 'retry';
  if (last.decision === 'deferred') return 'deferral';
  return 'scheduled';
}
