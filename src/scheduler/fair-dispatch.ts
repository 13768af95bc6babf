import { Job, type JobsOptions, type Queue } from 'bullmq';
import type { RedisClient } from '../redis/connection.js';
import { requeueKeys } from '../redis/keys.js';
import { defineScript, queueScript, runScript } from '../redis/scripts.js';
import { bullKeys } from './job-moves.js';

/**
 * Fair dispatch across keys, on BullMQ's own 'prioritized' sorted set (so a
 * keyed job is always in a BullMQ state): a keyed job is added by BullMQ
 * with priority 1, and in the same MULTI `fairStamp` moves it to its key's
 * turn (start-time fair queuing; see `src/redis/lua/fairStamp-4.lua`).
 * Knows of BullMQ's insides: `Job#addJob` on a transaction, the
 * 'prioritized' set's scores and its priority counter `pc` (see
 * `job-moves.ts`, whose test trips on an upgrade that changes them).
 */

/** One job to add: BullMQ's options, and its dispatch key with its cost if it has one. */
export interface FairEntry {
  name: string;
  data: unknown;
  opts: JobsOptions;
  dispatch?: { key: string; cost: number };
}

/**
 * Adds `entries` to `queue` in one MULTI, atomically and in one round trip:
 * each job by BullMQ's own add, and right after a keyed one, its stamp. A
 * job whose id is already known stays where it is.
 */
export async function addFair(
  queue: Queue,
  redis: RedisClient,
  queueName: string,
  bullPrefix: string,
  entries: readonly FairEntry[],
): Promise<Job[]> {
  defineScript(redis, 'fairStamp');
  const bull = bullKeys(queueName, bullPrefix);
  const fair = requeueKeys(queueName).fair;
  const client = await queue.getBackend().client;
  const multi = client.multi();
  const jobs: Job[] = [];
  // Each add is queued on the MULTI before addJob's first await.
  const adds: Promise<unknown>[] = [];
  for (const entry of entries) {
    const id = String(entry.opts.jobId);
    const job = new Job(queue, entry.name, entry.data, entry.opts, id);
    jobs.push(job);
    adds.push(job.addJob(multi as never));
    if (entry.dispatch)
      queueScript(
        multi,
        'fairStamp',
        [bull.prioritized, bull.pc, fair, bull.prefix + id],
        [id, entry.dispatch.key, entry.dispatch.cost],
      );
  }
  await Promise.all(adds);
  const replies = (await multi.exec()) ?? [];
  let reply = 0;
  for (const [index, entry] of entries.entries()) {
    const [err, id] = replies[reply++] ?? [new Error('requeue: the add was not run')];
    if (err) throw err;
    jobs[index]!.id = String(id);
    if (entry.dispatch) {
      const [stampErr] = replies[reply++] ?? [new Error('requeue: the fair stamp was not run')];
      if (stampErr) throw stampErr;
    }
  }
  return jobs;
}

/**
 * Drops fair-dispatch state that no waiting job needs (all of it when no
 * keyed job waits). Returns how many keys were dropped.
 */
export async function trimFairState(
  redis: RedisClient,
  queueName: string,
  bullPrefix: string,
): Promise<number> {
  const bull = bullKeys(queueName, bullPrefix);
  return runScript<number>(redis, 'fairTrim', [bull.prioritized, requeueKeys(queueName).fair], []);
}
