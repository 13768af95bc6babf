import type { RedisClient } from '../../redis/connection.js';
import { bullKeys } from './bull-keys.js';

/** Entries read at most per call: BullMQ trims its event stream to 10,000 by default. */
const maxEntries = 20_000;

/** A queue's activity per bin, read from BullMQ's event stream. */
export interface Activity {
  from: number;
  binMs: number;
  /** Jobs completed per bin. */
  completed: number[];
  /** Attempts that failed and were scheduled again (retries and deferrals) per bin. */
  retried: number[];
  /** Deaths per bin (the `failed` event requeue writes with every dead-letter move). */
  dead: number[];
  /** The oldest event the stream still holds, if any: bins before it are not known. */
  oldestAt: number | undefined;
  /** Whether the read stopped at {@link maxEntries} (the newest bins are short). */
  truncated: boolean;
}

/**
 * Completions, retries and deaths of queue `queue` per `binMs` from `from`
 * on, counted from BullMQ's event stream (`<prefix>:<queue>:events`, which
 * every worker of the fleet writes, trimmed by BullMQ): one XRANGE, nothing
 * written. A `delayed` event right after its job's `added` is a job added
 * with a delay, not a retry, and is not counted.
 */
export async function readActivity(
  redis: RedisClient,
  queue: string,
  from: number,
  binMs: number,
  bins: number,
  prefix = 'bull',
): Promise<Activity> {
  const key = bullKeys(queue, prefix).events;
  const [entries, oldest] = await Promise.all([
    redis.xrange(key, String(from), '+', 'COUNT', maxEntries),
    redis.xrange(key, '-', '+', 'COUNT', 1),
  ]);
  const out: Activity = {
    from,
    binMs,
    completed: new Array<number>(bins).fill(0),
    retried: new Array<number>(bins).fill(0),
    dead: new Array<number>(bins).fill(0),
    oldestAt: oldest[0] ? Number(oldest[0][0].split('-')[0]) : undefined,
    truncated: entries.length >= maxEntries,
  };
  let addedJob: string | undefined;
  for (const [id, fields] of entries) {
    const at = Number(id.split('-')[0]);
    const bin = Math.floor((at - from) / binMs);
    const event = field(fields, 'event');
    const jobId = field(fields, 'jobId');
    const inRange = bin >= 0 && bin < bins;
    if (inRange && event === 'completed') out.completed[bin]! += 1;
    else if (inRange && event === 'failed') out.dead[bin]! += 1;
    else if (inRange && event === 'delayed' && jobId !== addedJob) out.retried[bin]! += 1;
    addedJob = event === 'added' ? jobId : undefined;
  }
  return out;
}

function field(fields: string[], name: string): string | undefined {
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === name) return fields[i + 1];
  return undefined;
}
