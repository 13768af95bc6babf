import { Job, type JobsOptions, type Queue } from 'bullmq';
import type { RedisClient } from '../../redis/connection.js';
import { requeueKeys } from '../../redis/keys.js';
import * as lua from '../../redis/lua-commands.js';
import { bullKeys } from './bull-keys.js';
import { defineFairAdd, keyedAddClient, type CommandRunner } from './fair-add.js';

/**
 * Fair dispatch across keys, on BullMQ's own 'prioritized' sorted set (so a
 * keyed job is always in a BullMQ state): a keyed job is added by BullMQ's
 * own add script with priority 1, and in the same script call its stamp
 * moves it to its key's turn (start-time fair queuing; see
 * `src/redis/lua/includes/fairStamp.lua` and `fair-add.ts`). Knows of
 * BullMQ's insides: `Job#addJob` on a client or a transaction, the
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

/** Where one queue's keyed adds go: its BullMQ queue, connection and keys. */
export class FairAdder {
  private readonly fair: string;
  private readonly jobPrefix: string;

  constructor(
    private readonly queue: Queue,
    private readonly redis: RedisClient,
    queueName: string,
    bullPrefix: string,
  ) {
    this.fair = requeueKeys(queueName).fair;
    this.jobPrefix = bullKeys(queueName, bullPrefix).prefix;
  }

  /**
   * Adds one keyed job: one script call, as a plain add is (BullMQ's add and
   * the stamp in one script). A job whose id is already known stays where it is.
   */
  async add(entry: FairEntry): Promise<Job> {
    if (!entry.dispatch) throw new Error('requeue: a keyed add without its dispatch key');
    const command = defineFairAdd(this.redis);
    const job = new Job(this.queue, entry.name, entry.data, entry.opts, String(entry.opts.jobId));
    const client = (await this.queue.getBackend().client) as unknown as CommandRunner;
    job.id = String(
      await job.addJob(this.through(client, command, job.id!, entry.dispatch) as never),
    );
    return job;
  }

  /**
   * Adds `entries` in one MULTI, atomically and in one round trip: each by
   * BullMQ's own add, a keyed one with its stamp in the same script call.
   * A job whose id is already known stays where it is. An entry BullMQ
   * refuses before anything is sent (data it cannot serialise) throws, and
   * nothing is sent; one refused in Redis throws after the EXEC.
   */
  async addAll(entries: readonly FairEntry[]): Promise<Job[]> {
    const command = defineFairAdd(this.redis);
    const client = await this.queue.getBackend().client;
    const multi = client.multi();
    // Each add is queued on the MULTI before addJob's first await; one
    // refused (by BullMQ, or by the stand-in) means no EXEC.
    const queued: Promise<unknown>[] = [];
    const jobs: Job[] = [];
    try {
      for (const entry of entries) {
        const job = new Job(
          this.queue,
          entry.name,
          entry.data,
          entry.opts,
          String(entry.opts.jobId),
        );
        const target = entry.dispatch
          ? this.through(multi as unknown as CommandRunner, command, job.id!, entry.dispatch)
          : multi;
        queued.push(job.addJob(target as never));
        jobs.push(job);
      }
    } finally {
      // Every queued add settles before this returns or throws: none rejects unheard.
      await Promise.allSettled(queued);
    }
    await Promise.all(queued);
    const replies = jobs.length > 0 ? ((await multi.exec()) ?? []) : [];
    return jobs.map((job, i) => {
      const [err, id] = replies[i] ?? [new Error('requeue: the add was not run')];
      if (err) throw err;
      job.id = String(id);
      return job;
    });
  }

  private through(
    bull: CommandRunner,
    command: string,
    id: string,
    dispatch: { key: string; cost: number },
  ): CommandRunner {
    return keyedAddClient(bull, command, {
      fair: this.fair,
      job: this.jobPrefix + id,
      id,
      dispatchKey: dispatch.key,
      cost: dispatch.cost,
    });
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
