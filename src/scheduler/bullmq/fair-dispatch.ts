import { Job, type JobsOptions, type Queue } from 'bullmq';
import type { RedisClient } from '../../redis/connection.js';
import { requeueKeys } from '../../redis/keys.js';
import * as lua from '../../redis/lua-commands.js';
import { bullKeys } from './bull-keys.js';

/**
 * Fair dispatch across keys, on BullMQ's own 'prioritized' sorted set (so a
 * keyed job is always in a BullMQ state): a keyed job is added by BullMQ
 * with priority 1, and in the same MULTI `fairStamp` moves it to its key's
 * turn (start-time fair queuing; see `src/redis/lua/fairStamp-4.lua`).
 * Knows of BullMQ's insides: `Job#addJob` on a transaction, the
 * 'prioritized' set's scores and its priority counter `pc` (see
 * `bull-keys.ts`, whose test trips on an upgrade that changes them).
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
 * job whose id is already known stays where it is. An entry BullMQ refuses
 * before anything is sent (data it cannot serialise) fails alone, or, when
 * `together`, nothing is sent and its error is thrown.
 */
export async function addFair(
  queue: Queue,
  redis: RedisClient,
  queueName: string,
  bullPrefix: string,
  entries: readonly FairEntry[],
  together = false,
): Promise<PromiseSettledResult<Job>[]> {
  lua.defineFairStamp(redis);
  const bull = bullKeys(queueName, bullPrefix);
  const fair = requeueKeys(queueName).fair;
  const client = await queue.getBackend().client;
  const multi = client.multi();
  const settled: PromiseSettledResult<Job>[] = [];
  const sent: { index: number; job: Job; stamped: boolean }[] = [];
  // Each add is queued on the MULTI before addJob's first await.
  const adds: Promise<unknown>[] = [];
  for (const [index, entry] of entries.entries()) {
    const id = String(entry.opts.jobId);
    try {
      const job = new Job(queue, entry.name, entry.data, entry.opts, id);
      adds.push(job.addJob(multi as never));
      sent.push({ index, job, stamped: entry.dispatch !== undefined });
    } catch (reason) {
      if (together) throw reason;
      settled[index] = { status: 'rejected', reason };
      continue;
    }
    if (entry.dispatch)
      lua.queueFairStamp(
        multi,
        [bull.prioritized, bull.pc, fair, bull.prefix + id],
        [id, entry.dispatch.key, entry.dispatch.cost],
      );
  }
  await Promise.all(adds);
  const replies = sent.length > 0 ? ((await multi.exec()) ?? []) : [];
  let reply = 0;
  for (const { index, job, stamped } of sent) {
    const [err, id] = replies[reply++] ?? [new Error('requeue: the add was not run')];
    const [stampErr] = stamped ? (replies[reply++] ?? [new Error('requeue: no stamp')]) : [];
    const reason = err ?? stampErr;
    if (reason) settled[index] = { status: 'rejected', reason };
    else {
      job.id = String(id);
      settled[index] = { status: 'fulfilled', value: job };
    }
  }
  return settled;
}

/**
 * Keyed adds made in the same tick, sent together: one MULTI for many jobs
 * costs far less per job than one each (ioredis builds every MULTI anew).
 * Each add still succeeds or fails on its own.
 */
export class FairBatcher {
  private pending: { entry: FairEntry; done: (result: PromiseSettledResult<Job>) => void }[] = [];

  constructor(
    private readonly send: (entries: FairEntry[]) => Promise<PromiseSettledResult<Job>[]>,
    private readonly maxBatch = 1_000,
  ) {}

  add(entry: FairEntry): Promise<Job> {
    return new Promise<PromiseSettledResult<Job>>((done) => {
      if (this.pending.length === 0) queueMicrotask(() => void this.flush());
      this.pending.push({ entry, done });
    }).then((result) => {
      if (result.status === 'rejected') throw result.reason;
      return result.value;
    });
  }

  private async flush(): Promise<void> {
    const batch = this.pending;
    this.pending = [];
    for (let start = 0; start < batch.length; start += this.maxBatch) {
      const part = batch.slice(start, start + this.maxBatch);
      const results = await this.send(part.map((p) => p.entry)).catch(
        (reason: unknown): PromiseSettledResult<Job>[] =>
          part.map(() => ({ status: 'rejected', reason })),
      );
      part.forEach((p, i) =>
        p.done(
          results[i] ?? { status: 'rejected', reason: new Error('requeue: the add was not run') },
        ),
      );
    }
  }
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
  return lua.fairTrim(redis, bull.prioritized, requeueKeys(queueName).fair);
}
