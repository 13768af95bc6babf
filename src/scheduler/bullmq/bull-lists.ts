import type { RedisClient } from '../../redis/connection.js';
import { parseJobState, type JobState } from '../../policy/job-state.js';
import { bullKeys, delayedDueAt } from './bull-keys.js';

/**
 * Paged, read-only lists of a queue's BullMQ sets for the dashboard: the
 * waiting, active, delayed and completed jobs, each with its total (the
 * set's own size, read in the same round trip as the page). Nothing here
 * writes (promise 3).
 */

/** A set of a queue a list reads. */
export type ListedState = 'waiting' | 'active' | 'delayed' | 'completed';

/** The states {@link listJobs} reads, for the routes' schema. */
export const listedStates = ['waiting', 'active', 'delayed', 'completed'] as const;

/** One job of a list. */
export interface ListedJob {
  id: string;
  name: string;
  addedAt: number | undefined;
  /** When a delayed job is due. */
  dueAt: number | undefined;
  /** BullMQ's delayed score as read: the fence a retry-now or delete must present. */
  score: string | undefined;
  attemptsStarted: number;
  attemptsMade: number;
  processedAt: number | undefined;
  finishedAt: number | undefined;
  state: JobState | undefined;
  life: number;
}

/** One page of a list and how many jobs the set holds. */
export interface JobListPage {
  total: number;
  items: ListedJob[];
}

const fields = ['name', 'timestamp', 'ats', 'atm', 'processedOn', 'finishedOn', 'rq', 'rql'];

/**
 * Jobs `offset`…`offset + limit` of one set: waiting in the order they will
 * run (the wait list's fetch end first, then prioritized jobs by priority),
 * active, delayed soonest first, completed newest first. Three round trips;
 * the jobs' data is not read (the job view reads one job's).
 */
export async function listJobs(
  redis: RedisClient,
  queue: string,
  state: ListedState,
  page: { offset: number; limit: number },
  prefix = 'bull',
): Promise<JobListPage> {
  const keys = bullKeys(queue, prefix);
  const { offset, limit } = page;
  const end = offset + limit - 1;
  const sizes = redis.pipeline();
  if (state === 'waiting') sizes.llen(keys.wait).zcard(keys.prioritized);
  else if (state === 'active') sizes.llen(keys.active);
  else sizes.zcard(state === 'delayed' ? keys.delayed : keys.completed);
  const counts = (await exec(sizes)).map(Number);
  const total = counts.reduce((a, b) => a + b, 0);
  const ids = redis.pipeline();
  if (state === 'waiting') {
    // BullMQ fetches from the wait list's right end, then prioritized jobs by score.
    const waitLen = counts[0]!;
    if (offset < waitLen)
      ids.lrange(keys.wait, Math.max(0, waitLen - 1 - end), waitLen - 1 - offset);
    if (end >= waitLen) ids.zrange(keys.prioritized, Math.max(0, offset - waitLen), end - waitLen);
  } else if (state === 'active') ids.lrange(keys.active, offset, end);
  else if (state === 'delayed') ids.zrange(keys.delayed, offset, end, 'WITHSCORES');
  else ids.zrevrange(keys.completed, offset, end);
  const got = (await exec(ids)) as string[][];
  let entries: [string, string | undefined][];
  if (state === 'delayed') entries = pairs(got[0] ?? []);
  else if (state === 'waiting') {
    const waitLen = counts[0]!;
    const fromWait = offset < waitLen ? got[0]!.slice().reverse() : [];
    const prioritized = end >= waitLen ? (got[offset < waitLen ? 1 : 0] ?? []) : [];
    entries = [...fromWait, ...prioritized].map((id) => [id, undefined]);
  } else entries = (got[0] ?? []).map((id) => [id, undefined]);
  if (entries.length === 0) return { total, items: [] };
  const reads = redis.pipeline();
  for (const [id] of entries) reads.hmget(keys.prefix + id, ...fields);
  const rows = await exec(reads);
  const items = entries.map(([id, score], i): ListedJob => {
    const [name, ts, ats, atm, processedOn, finishedOn, rq, rql] = (rows[i] ?? []) as (
      string | null
    )[];
    return {
      id,
      name: name ?? '',
      addedAt: num(ts),
      dueAt: score === undefined ? undefined : delayedDueAt(Number(score)),
      score,
      attemptsStarted: Number(ats ?? 0),
      attemptsMade: Number(atm ?? 0),
      processedAt: num(processedOn),
      finishedAt: num(finishedOn),
      state: parseJobState(rq),
      life: Number(rql ?? 0),
    };
  });
  return { total, items };
}

/** Runs a pipeline; the first error thrown. */
async function exec(pipeline: ReturnType<RedisClient['pipeline']>): Promise<unknown[]> {
  return ((await pipeline.exec()) ?? []).map(([err, v]) => {
    if (err) throw err;
    return v;
  });
}

/** `[member, score, member, score…]` as pairs. */
function pairs(raw: string[]): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) out.push([raw[i]!, raw[i + 1]!]);
  return out;
}

function num(v: string | null | undefined): number | undefined {
  if (v == null) return undefined;
  const n = Number(v);
  return Number.isFinite(n) ? n : undefined;
}

/** Whether queue `queue` is paused (BullMQ's `paused` field of its meta hash). Reads only. */
export async function isQueuePaused(
  redis: RedisClient,
  queue: string,
  prefix = 'bull',
): Promise<boolean> {
  return (await redis.hexists(bullKeys(queue, prefix).meta, 'paused')) === 1;
}
