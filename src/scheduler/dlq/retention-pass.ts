import { z } from 'zod';
import type { Logger } from '../../config/logger.js';
import { limits } from '../../policy/limits.js';
import type { RedisClient } from '../../redis/connection.js';
import * as lua from '../../redis/lua-commands.js';
import { newJobId, type Clock } from '../../util/system.js';

/** Retention of dead jobs, like Sidekiq's dead set. */
export const retentionSchema = z
  .object({
    /** Dead jobs older than this are dropped. @defaultValue 180 days */
    maxAgeMs: z
      .number()
      .int()
      .positive()
      .default(180 * 24 * 3600 * 1000),
    /** At most this many dead jobs are kept; the oldest go first. @defaultValue `10_000` */
    maxCount: z.number().int().positive().default(10_000),
    /**
     * How often each worker applies the retention while no job dies (jobs
     * dying have it applied within a second of the last). @defaultValue `5_000`
     */
    intervalMs: z.number().int().min(10).max(limits.timeoutMs).default(5_000),
  })
  .strict();
export type Retention = z.infer<typeof retentionSchema>;

/** What one application of the retention removed, by why. */
export interface RetentionResult {
  byAge: number;
  byCount: number;
}

/** Records removed per script: bounded work, so a huge DLQ never holds Redis for long. */
export const trimBatch = 1_000;

/**
 * How long a pass holds the fleet's lock after one of its batches: ample for
 * the next round trip; a pass whose process died frees it within this.
 */
export const trimLockMs = 5_000;

/** How a retention pass ended. */
export type RetentionPass =
  | { kind: 'done'; removed: RetentionResult }
  /** Another pass holds the fleet's lock (for `retryInMs` at most); nothing was touched. */
  | { kind: 'busy'; retryInMs: number };

/** What a retention pass works on: one DLQ. */
export interface RetentionTarget {
  readonly redis: RedisClient;
  readonly keys: { dead: string; deadRecordPrefix: string; deadTrimLock: string };
  readonly retention: Retention;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Told of every pass that removed something (metrics). */
  readonly onTrim: ((removed: RetentionResult) => void) | undefined;
}

/**
 * One retention pass: batches of at most {@link trimBatch} removals, each one
 * script (`trimDeadBatch-2.lua`), under a token that keeps every other pass of the
 * fleet out until this one ends. Never silent: what it removed (even when a
 * later batch failed) is logged as a warning with how many and why, and
 * reported to `onTrim`. An aborted `signal` ends the pass between batches.
 */
export async function runRetentionPass(
  target: RetentionTarget,
  signal?: AbortSignal,
): Promise<RetentionPass> {
  const { redis, keys, retention } = target;
  const token = newJobId();
  const cutoff = target.clock.now() - retention.maxAgeMs;
  const removed: RetentionResult = { byAge: 0, byCount: 0 };
  try {
    const batch = (limit: number) =>
      lua.trimDeadBatch(
        redis,
        [keys.dead, keys.deadTrimLock],
        [keys.deadRecordPrefix, cutoff, retention.maxCount, limit, token, trimLockMs],
      );
    for (;;) {
      const [byAge, byCount] = await batch(trimBatch);
      if (byAge === -1) {
        // Another pass holds the lock (or took it over after ours expired).
        if (removed.byAge + removed.byCount > 0) break;
        return { kind: 'busy', retryInMs: Math.max(0, byCount) };
      }
      removed.byAge += byAge;
      removed.byCount += byCount;
      // A short batch freed the lock: the pass is over.
      if (byAge + byCount < trimBatch) break;
      if (signal?.aborted) {
        // Stopped early (the worker closes): free the lock for the rest of the fleet.
        await batch(0);
        break;
      }
    }
  } finally {
    report(target, removed);
  }
  return { kind: 'done', removed };
}

function report(target: RetentionTarget, removed: RetentionResult): void {
  const total = removed.byAge + removed.byCount;
  if (total === 0) return;
  target.logger.warn(
    {
      removedByAge: removed.byAge,
      removedByCount: removed.byCount,
      maxAgeMs: target.retention.maxAgeMs,
      maxCount: target.retention.maxCount,
    },
    `DLQ retention removed ${total} dead job(s): ${removed.byAge} older than maxAgeMs, ` +
      `${removed.byCount} beyond maxCount`,
  );
  target.onTrim?.({ byAge: removed.byAge, byCount: removed.byCount });
}
