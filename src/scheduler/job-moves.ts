import type { Job, Worker } from 'bullmq';
import type { RedisClient } from '../redis/connection.js';
import { parseJobState, serializeJobState, type JobState } from '../policy/job-state.js';
import { requeueKeys } from '../redis/keys.js';
import { runScript } from '../redis/scripts.js';

/**
 * The one module that knows BullMQ's insides: its key layout (`bull:<queue>:…`,
 * a job hash per id, `<job>:lock`), the fields of a job hash, and its queue
 * backend's `moveToDelayed` with `fieldsToUpdate`. Everything else moves jobs
 * through the functions here. `test/integration/job-moves.test.ts` fails
 * loudly if a BullMQ upgrade changes any of it.
 */

/** The BullMQ version whose internals this module was written against. */
export const bullmqVersionSupported = '6.7.0';

/** The keys of a BullMQ queue this module uses. */
export interface BullKeys {
  /** `bull:<queue>:` — a job's hash is this plus its id. */
  readonly prefix: string;
  readonly active: string;
  readonly wait: string;
  readonly stalled: string;
  readonly meta: string;
  readonly marker: string;
  readonly events: string;
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
  };
}

/** What a job's hash holds of requeue's state. */
export interface StoredState {
  state: JobState | undefined;
  /** The job's life: how many times it was replayed. */
  life: number;
  /** BullMQ's started attempts when this life began. */
  lifeOffset: number;
}

/** The result of a dead-letter move. */
export type DeadLetterResult =
  | { kind: 'moved'; generation: string }
  | { kind: 'lock-lost' }
  /** An earlier death holds the id: merge its history and move again expecting `generation`. */
  | { kind: 'occupied'; generation: string; state: JobState | undefined }
  /** The earlier death expected has left meanwhile (replayed or purged): move again expecting none. */
  | { kind: 'vanished' };

/** Moves of one queue's jobs, fenced by the job's lock. */
export class JobMoves {
  readonly keys: BullKeys;
  private readonly rq;

  constructor(
    private readonly redis: RedisClient,
    private readonly worker: Worker,
    readonly queue: string,
  ) {
    this.keys = bullKeys(queue, worker.opts.prefix ?? 'bull');
    this.rq = requeueKeys(queue);
  }

  /** The job's stored state; the first attempt of a first life has none (no round trip). */
  async load(job: Job): Promise<StoredState> {
    if (job.attemptsStarted <= 1) return { state: undefined, life: 0, lifeOffset: 0 };
    const [rq, life, offset] = await this.redis.hmget(this.jobKey(job.id!), 'rq', 'rql', 'rqo');
    return { state: parseJobState(rq), life: Number(life ?? 0), lifeOffset: Number(offset ?? 0) };
  }

  /**
   * Moves the job to the delayed set, writing its state in the same step
   * (BullMQ's own script; it checks the lock). `countsAttempt: false` for a
   * deferral. Rejects when the lock is no longer ours.
   */
  async delay(
    job: Job,
    token: string,
    state: JobState,
    delayMs: number,
    now: number,
    countsAttempt: boolean,
  ): Promise<void> {
    await this.worker.backend.moveToDelayed(
      String(job.id),
      now,
      Math.max(0, Math.round(delayMs)),
      token,
      { skipAttempt: !countsAttempt, fieldsToUpdate: { rq: serializeJobState(state) } },
    );
  }

  /** Writes the state while the lock is ours (before BullMQ completes the job). */
  async writeState(job: Job, token: string, state: JobState): Promise<boolean> {
    const key = this.jobKey(job.id!);
    const written = await runScript(
      this.redis,
      'setStateIfLocked',
      [key, `${key}:lock`],
      [token, serializeJobState(state)],
    );
    return written === 1;
  }

  /** Moves an active job to the DLQ in one script (`src/redis/lua/deadLetter-9.lua`). */
  async deadLetter(
    job: Job,
    token: string,
    state: JobState,
    death: string,
    deadAt: number,
    expectedGeneration = '',
  ): Promise<DeadLetterResult> {
    const id = String(job.id);
    const key = this.jobKey(id);
    const reply = (await runScript(
      this.redis,
      'deadLetter',
      [
        this.keys.active,
        this.keys.stalled,
        key,
        `${key}:lock`,
        `${key}:logs`,
        this.rq.dead,
        this.rq.deadRecordPrefix + id,
        this.rq.deadSequence,
        this.keys.events,
      ],
      [token, id, serializeJobState(state), death, deadAt, expectedGeneration],
    )) as [number, (string | number)?, string?];
    if (reply[0] === 1) return { kind: 'moved', generation: String(reply[1]) };
    if (reply[0] === 3) return { kind: 'vanished' };
    if (reply[0] === 2)
      return { kind: 'occupied', generation: String(reply[1]), state: parseJobState(reply[2]) };
    return { kind: 'lock-lost' };
  }

  private jobKey(id: string): string {
    return this.keys.prefix + id;
  }
}

/** A dead record to bring back: its id, the death generation read, a fresh id in case its own is taken. */
export interface ReplayRef {
  id: string;
  gen: string;
  freshId: string;
}

/**
 * Moves dead records back into queue `queue`'s wait list, each in one step
 * fenced by its generation (`src/redis/lua/replayDead-6.lua`). Returns, per
 * record, the id it got in the queue, or `undefined` when it was skipped
 * (gone, or a newer death).
 */
export async function replayDeadJobs(
  redis: RedisClient,
  queue: string,
  refs: readonly ReplayRef[],
  now: number,
  prefix = 'bull',
): Promise<{ id: string; to: string | undefined }[]> {
  if (refs.length === 0) return [];
  const bull = bullKeys(queue, prefix);
  const rq = requeueKeys(queue);
  const args: (string | number)[] = [rq.deadRecordPrefix, bull.prefix, now];
  for (const ref of refs) args.push(ref.id, ref.gen, ref.freshId);
  const reply = await runScript<string[]>(
    redis,
    'replayDead',
    [rq.dead, bull.wait, bull.meta, bull.active, bull.marker, bull.events],
    args,
  );
  const out: { id: string; to: string | undefined }[] = [];
  for (let i = 0; i < reply.length; i += 2)
    out.push({ id: reply[i]!, to: reply[i + 1] === '' ? undefined : reply[i + 1] });
  return out;
}
