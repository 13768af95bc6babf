/**
 * Admission: an attempt past its key's pause, bulkhead and breaker, or the
 * {@link Attempt} that says why it does not run (`deferred`, or `dead` past
 * `maxAttempts` / `maxDeferrals` or on a payload its schema refuses).
 */
import type { Job } from 'bullmq';
import { formatZodError } from '../../util/parse-config.js';
import {
  attemptOf,
  recordDeferral,
  recordStalls,
  type Death,
  type DeferralReason,
} from '../../policy/attempt-history.js';
import { readJobMeta, stateForLife, type JobMeta, type JobState } from '../../policy/job-state.js';
import { consecutiveDeferrals, deferredUntil } from '../../policy/deferral.js';
import type { RetryPolicy } from '../../policy/retry-policy.js';
import type { Lease } from '../key-limits.js';
import type { StoredState } from '../bullmq/job-moves.js';
import type { Attempt, AttemptContext } from './context.js';
import { AttemptHandle } from './handle.js';

/**
 * Reads the job and admits the attempt past its key's pause and bulkhead, or
 * says why it does not run (an {@link Attempt} already decided).
 */
export function admit<T>(
  ctx: AttemptContext<T>,
  job: Job,
  stored: StoredState,
): Admitted<T> | Attempt {
  const meta = readJobMeta(job.opts);
  const life = stored.life;
  const lifeState = stateForLife(stored.state, life);
  const attempt = attemptOf(job.attemptsStarted, stored.lifeOffset, lifeState);
  const now = ctx.clock.now();
  const state = recordStalls(lifeState, attempt, now);
  const stalls = state.history.length - lifeState.history.length;
  if (stalls === 0 && state.history.length > 0) {
    // A retry or deferral of this life coming back: its record says when it was due.
    const last = state.history[state.history.length - 1]!;
    if (last.retryAt !== undefined && (last.replay ?? 0) === life)
      ctx.onReturn(job, attempt, last.retryAt, now);
  }
  const policy = ctx.policyOf(meta);

  if (attempt > policy.maxAttempts) {
    // Earlier attempts died with their worker; this one would exceed the limit.
    const death = dying('max-attempts', 'worker died during the last attempt', attempt - 1, now);
    return { attempt, meta, life, kind: 'dead', death, state };
  }

  let data = job.data as T;
  if (ctx.schema) {
    const parsed = ctx.schema.safeParse(job.data);
    if (!parsed.success) {
      const message = formatZodError(parsed.error, 'data');
      const death = dying('invalid-payload', message, attempt, now);
      return { attempt, meta, life, kind: 'dead', death, state };
    }
    data = parsed.data;
  }

  const handle = new AttemptHandle<T>(ctx, job, data, meta, attempt, life, state.history);
  const key = ctx.keyOf(handle);
  const admitted = new Admitted(attempt, meta, life, state, stalls, policy, key, handle, now);
  if (key === undefined) return admitted;
  const paused = ctx.keys.pausedUntil(key);
  if (paused !== undefined)
    return deferAttempt(
      ctx,
      admitted,
      key,
      deferredUntil({ reason: 'pause', notBefore: paused, random: ctx.random }),
      'pause',
    );
  if (!ctx.keys.enter(key, ctx.keyConcurrency(handle))) return deferFull(ctx, admitted, key);
  admitted.entered = true;
  return admitted;
}

/** Puts back a job whose key is full (its bulkhead here, or its adaptive limit in the fleet). */
export function deferFull<T>(ctx: AttemptContext<T>, a: Admitted<T>, key: string): Attempt {
  const consecutive = consecutiveDeferrals(a.state);
  const retryAt = deferredUntil({
    reason: 'bulkhead',
    now: a.now,
    consecutive,
    random: ctx.random,
  });
  return deferAttempt(ctx, a, key, retryAt, 'bulkhead');
}

/** Puts the job back without running it: no attempt used, bounded by `maxDeferrals`. */
export function deferAttempt<T>(
  ctx: AttemptContext<T>,
  a: Admitted<T>,
  key: string,
  retryAt: number,
  reason: DeferralReason,
): Attempt {
  const why = {
    breaker: 'the circuit of',
    pause: 'pause',
    bulkhead: 'the bulkhead of',
    'rate-limit': 'the rate limit of',
  }[reason];
  const { attempt, meta, life, state, now } = a;
  a.handle.forget();
  if (state.deferrals + 1 > ctx.maxDeferrals) {
    const message = `${why} ${key} held the job back through ${ctx.maxDeferrals} deferrals`;
    const death = dying('max-deferrals', message, attempt - 1, now);
    return { attempt, meta, life, kind: 'dead', death, state };
  }
  const deferred = recordDeferral(state, { attempt, key, retryAt, now, reason });
  return { attempt, meta, life, kind: 'deferred', retryAt, key, reason, state: deferred };
}

/**
 * One attempt past its key's pause and bulkhead: what {@link admitAndRun}
 * works on. A class: one per job, so its shape is built once.
 */
export class Admitted<T> {
  /** The attempt holds a place in its key's bulkhead (to leave when it is over). */
  entered = false;
  /** The breaker the attempt answers to, once it let the attempt run. */
  breakerKey: string | undefined = undefined;
  /** The breaker's probe this attempt is. */
  probeId: string | undefined = undefined;
  /** When the handler was called. */
  startedAt = 0;
  /** When the handler's outcome was known (0 until then). */
  finishedAt = 0;
  /** The attempt's place under its key's adaptive limit (`key-limits.ts`). */
  lease: Lease | undefined = undefined;

  constructor(
    readonly attempt: number,
    readonly meta: JobMeta,
    readonly life: number,
    readonly state: JobState,
    /** Attempts a crash interrupted, recorded now. */
    readonly stalls: number,
    readonly policy: RetryPolicy,
    readonly key: string | undefined,
    readonly handle: AttemptHandle<T>,
    /** When the attempt began (before the handler ran). */
    readonly now: number,
  ) {}
}

/** Asks the job's breaker: the deferral when it refuses, nothing when the attempt may run. */
export async function askBreaker<T>(
  ctx: AttemptContext<T>,
  a: Admitted<T>,
  breakerKey: string,
): Promise<Attempt | undefined> {
  const job = a.handle.bullJob;
  // A job that already failed is a retry: half-open, retries probe first.
  const checked = ctx.gate.check(
    breakerKey,
    () => `${job.id}:${job.attemptsStarted}`,
    a.attempt > 1,
  );
  const admission = checked instanceof Promise ? await checked : checked;
  if (admission.kind === 'reject') {
    const retryAt = deferredUntil({
      reason: 'breaker',
      notBefore: admission.retryAt,
      random: ctx.random,
    });
    return deferAttempt(ctx, a, breakerKey, retryAt, 'breaker');
  }
  a.breakerKey = breakerKey;
  if (admission.kind === 'probe') a.probeId = admission.probeId;
  return undefined;
}

/** A death record; `attempts` is never below 0. */
export function dying(
  reason: Death['reason'],
  message: string,
  attempts: number,
  deadAt: number,
): Death {
  return { reason, message, attempts: Math.max(0, attempts), deadAt };
}
