/**
 * The commands a model run is made of, for `fc.commands`. Each one acts on
 * the real system and tells the model only what it knows for certain; the
 * properties that need the whole run are checked at quiescence (check.ts).
 */
import fc from 'fast-check';
import {
  BreakerStore,
  DeadLetterQueue,
  createQueue,
  parseBreakerOptions,
  queueBreakerKey,
} from '../../src/index.js';
import { overwrittenKeys, reservedNames } from '../harness/reserved-names.js';
import type { Model } from './model.js';
import type { LogicalJob } from './model.js';
import { outcomes, type ModelJobData, type Outcome } from './protocol.js';
import { workerBreaker, type RealSystem } from './system.js';
import { SkewClock } from './skew-clock.js';
import { seqsOf } from './dead-records.js';
import { Base, sleep, showPlan, type Cmd, type Selector } from './command-base.js';
import { Replay, Purge, Trim } from './operator-commands.js';

export class Add extends Base {
  constructor(
    readonly key: string | undefined,
    readonly plan: Outcome[][],
    /** Fair dispatch's key (issue 22): the job waits in BullMQ's 'prioritized' set. */
    readonly dispatchKey?: string,
  ) {
    super();
  }
  /** Public so that {@link AddMany} can run several adds as one command. */
  override async act(m: Model, r: RealSystem): Promise<void> {
    const seq = m.nextSeq++;
    const data: ModelJobData = {
      seq,
      plan: this.plan,
      ...(this.dispatchKey !== undefined && { dispatch: this.dispatchKey }),
    };
    const added = await r.queue.add('model', data, {
      ...(this.key !== undefined && { idempotencyKey: this.key }),
      ...(this.dispatchKey !== undefined && { dispatchKey: this.dispatchKey }),
    });
    if (this.key === undefined) {
      m.add(seq, undefined, this.plan, added.id);
      if (!/^[A-Za-z][-0-9A-Z_a-z]{17}$/.test(added.id) && !m.notes.includes('keyless-ids')) {
        m.notes.push('keyless-ids');
      }
      return;
    }
    // A keyed add makes a job only when the key's id is free; look where the id is now.
    const [job, dead] = await Promise.all([r.queue.bull.getJob(added.id), r.dlq.get(added.id)]);
    const created =
      (job?.data as Partial<ModelJobData> | undefined)?.seq === seq ||
      (dead !== undefined && seqsOf(dead).has(seq));
    if (created) m.add(seq, this.key, this.plan, added.id);
    r.journal.push(`   seq ${seq} → ${added.id} ${created ? 'created' : '(no-op: key taken)'}`);
  }
  toString(): string {
    const fair = this.dispatchKey === undefined ? '' : `, dispatch=${this.dispatchKey}`;
    return `add(${this.key === undefined ? 'keyless' : `key=${this.key}`}, ${showPlan(this.plan)}${fair})`;
  }
}

export class AddMany extends Base {
  constructor(readonly adds: Add[]) {
    super();
  }
  protected async act(m: Model, r: RealSystem): Promise<void> {
    for (const add of this.adds) await add.act(m, r);
  }
  toString(): string {
    return `addMany(${this.adds.map((a) => a.toString()).join(', ')})`;
  }
}

/**
 * Keyed adds whose keys are BullMQ's or requeue's own key names (issue 21):
 * each is an ordinary keyed add, and afterwards every BullMQ key of the queue
 * still has its own type; the run's promises are checked at quiescence as for
 * any add.
 */
export class AddReservedKeys extends Base {
  constructor(readonly adds: Add[]) {
    super();
  }
  protected async act(m: Model, r: RealSystem): Promise<void> {
    for (const add of this.adds) await add.act(m, r);
    const overwritten = await overwrittenKeys(r.admin, `${r.queue.bull.qualifiedName}:`);
    if (overwritten.length > 0)
      m.violations.push(`#${m.step} a key overwrote BullMQ's ${overwritten.join(', ')}`);
  }
  toString(): string {
    return `addReservedKeys(${this.adds.map((a) => a.toString()).join(', ')})`;
  }
}

export class AddsDuringRedisRestart extends Base {
  constructor(
    readonly plans: Outcome[][][],
    readonly killAfterMs: number,
  ) {
    super();
  }
  protected async act(m: Model, r: RealSystem): Promise<void> {
    const seqs = this.plans.map(() => m.nextSeq++);
    const adds = this.plans.map((plan, i) =>
      r.queue.add('model', { seq: seqs[i]!, plan }).then(
        (added) => ({ added }),
        (error: unknown) => ({ error }),
      ),
    );
    await sleep(this.killAfterMs);
    await r.restartRedis();
    m.disturbed('all');
    const results = await Promise.all(adds);
    results.forEach((res, i) => {
      const seq = seqs[i]!;
      if ('added' in res) m.add(seq, undefined, this.plans[i]!, res.added.id);
      else m.add(seq, undefined, this.plans[i]!, '?', true);
      m.jobs.get(seq)!.calm = false;
      m.jobs.get(seq)!.hits += 1;
    });
  }
  toString(): string {
    return `keylessAddsDuringRedisRestart(n=${this.plans.length}, killAfterMs=${this.killAfterMs}, ${this.plans.map(showPlan).join(' ; ')})`;
  }
}

export class CrashWorker extends Base {
  constructor(readonly index: number) {
    super();
  }
  override check(m: Readonly<Model>): boolean {
    return this.index < m.config.workers;
  }
  protected async act(m: Model, r: RealSystem): Promise<void> {
    m.disturbed(await r.crash(this.index));
  }
  toString(): string {
    return `sigkillWorker(${this.index})`;
  }
}

export class RestartRedis extends Base {
  protected async act(m: Model, r: RealSystem): Promise<void> {
    await r.restartRedis();
    m.disturbed('all');
  }
  toString(): string {
    return 'restartRedis()';
  }
}

export class Pause extends Base {
  constructor(readonly ms: number) {
    super();
  }
  protected async act(): Promise<void> {
    await sleep(this.ms);
  }
  toString(): string {
    return `pause(${this.ms})`;
  }
}

export class Breaker extends Base {
  constructor(readonly open: boolean) {
    super();
  }
  override check(m: Readonly<Model>): boolean {
    return m.config.breaker;
  }
  protected async act(m: Model, r: RealSystem): Promise<void> {
    await forceBreaker(r, this.open);
    m.breakerOpen = this.open;
  }
  toString(): string {
    return this.open ? 'breakerForceOpen()' : 'breakerForceClose()';
  }
}

export async function forceBreaker(r: RealSystem, open: boolean): Promise<void> {
  const store = new BreakerStore(r.admin, r.name, parseBreakerOptions(workerBreaker));
  if (open) await store.forceOpen(queueBreakerKey, Date.now());
  else await store.forceClose(queueBreakerKey);
}

/** Status reads, as a Redis user that may not write: a read that writes fails. */
/**
 * bull-board's "retry" on completed jobs (BullMQ's `job.retry('completed')`),
 * up to `max` of them: each runs again in a new life, as a replay would.
 */
export class RerunCompleted extends Base {
  constructor(readonly max: number) {
    super();
  }
  protected async act(m: Model, r: RealSystem): Promise<void> {
    const completed = await r.queue.bull.getJobs(['completed'], 0, this.max - 1);
    const rerun: string[] = [];
    for (const job of completed) {
      const seq = (job.data as Partial<ModelJobData> | undefined)?.seq;
      const logical = typeof seq === 'number' ? m.jobs.get(seq) : undefined;
      try {
        await job.retry('completed');
      } catch {
        continue; // no longer completed (removed, or already sent back)
      }
      // Sent back: the model counts the new life it will run in.
      if (logical) logical.replays += 1;
      rerun.push(String(job.id));
    }
    r.journal.push(`   #${m.step} rerunCompleted: ${rerun.join(' ') || 'none'}`);
  }
  toString(): string {
    return `rerunCompleted(${this.max})`;
  }
}

export class StatusRead extends Base {
  protected async act(m: Model, r: RealSystem): Promise<void> {
    const reader = r.reader();
    const dlq = new DeadLetterQueue(r.name, { connection: reader });
    const queue = createQueue(r.name, { connection: reader });
    // Options unlike the workers' on purpose: `requeue breaker status` run from a laptop.
    const breaker = new BreakerStore(
      reader,
      r.name,
      parseBreakerOptions({ windowMs: 600, buckets: 6 }),
    );
    const reads: [string, () => Promise<unknown>][] = [
      ['breaker status', () => breaker.status(queueBreakerKey, Date.now())],
      ['breaker openBreakers', () => breaker.openBreakers()],
      ['breaker knownKeys', () => breaker.knownKeys()],
      ['dlq list', () => dlq.list({}, { offset: 0, limit: 20 })],
      ['dlq count', () => dlq.count({})],
      ['dlq count by reason', () => dlq.count({ reason: 'max-attempts' })],
      ['dlq get', () => dlq.get('k0')],
      ['queue counts', () => queue.counts()],
    ];
    try {
      for (const [what, read] of reads) {
        try {
          await read();
        } catch (err) {
          m.violations.push(
            `#${m.step} status read "${what}" failed for a Redis user without write access: ${(err as Error).message.split('\n')[0]}`,
          );
        }
      }
    } finally {
      await Promise.allSettled([dlq.close(), queue.close()]);
      reader.disconnect();
    }
  }
  toString(): string {
    return 'statusReads()';
  }
}

/** Which outcomes may be generated (MODEL_WITHOUT leaves some out). */
export function outcomeArb(without: ReadonlySet<string>): fc.Arbitrary<Outcome> {
  const weights: Partial<Record<Outcome, number>> = { ok: 6, retry: 6, permanent: 3 };
  const choices = outcomes
    .filter((o) => !without.has(o))
    .map((o) => ({ arbitrary: fc.constant(o), weight: weights[o] ?? 1 }));
  return fc.oneof(...choices);
}

export function planArb(without: ReadonlySet<string>): fc.Arbitrary<Outcome[][]> {
  return fc.array(fc.array(outcomeArb(without), { minLength: 1, maxLength: 4 }), {
    minLength: 1,
    maxLength: 2,
  });
}

/** The command arbitraries; `without` leaves out outcomes and commands by name. */
export function commandArbs(without: ReadonlySet<string>): fc.Arbitrary<Cmd>[] {
  const plan = planArb(without);
  const key = fc.constantFrom('k0', 'k1');
  const selector: fc.Arbitrary<Selector> = fc.oneof(
    fc.constant<Selector>({ kind: 'all' }),
    fc.nat(20).map<Selector>((pick) => ({ kind: 'id', pick })),
    fc
      .constantFrom('permanent-error', 'max-attempts')
      .map<Selector>((reason) => ({ kind: 'reason', reason })),
  );
  const arbs: [string, fc.Arbitrary<Cmd>, number][] = [
    ['add', fc.tuple(key, plan).map(([k, p]) => new Add(k, p)), 4],
    ['add', plan.map((p) => new Add(undefined, p)), 4],
    [
      'add',
      fc
        .array(fc.tuple(fc.option(key, { nil: undefined }), plan), { minLength: 2, maxLength: 5 })
        .map((adds) => new AddMany(adds.map(([k, p]) => new Add(k, p)))),
      2,
    ],
    [
      'reserved-keys',
      fc
        .array(fc.tuple(fc.constantFrom(...reservedNames()), plan), { minLength: 1, maxLength: 4 })
        .map((adds) => new AddReservedKeys(adds.map(([k, p]) => new Add(k, p)))),
      2,
    ],
    [
      'fair',
      fc
        .array(
          fc.tuple(fc.option(key, { nil: undefined }), plan, fc.constantFrom('d0', 'd1', 'd2')),
          { minLength: 1, maxLength: 5 },
        )
        .map((adds) => new AddMany(adds.map(([k, p, d]) => new Add(k, p, d)))),
      3,
    ],
    ['pause', fc.integer({ min: 20, max: 400 }).map((ms) => new Pause(ms)), 3],
    ['crash', fc.integer({ min: 0, max: 1 }).map((i) => new CrashWorker(i)), 1],
    ['redis-restart', fc.constant(new RestartRedis()), 1],
    [
      'adds-during-restart',
      fc
        .tuple(fc.array(plan, { minLength: 1, maxLength: 4 }), fc.integer({ min: 0, max: 3 }))
        .map(([plans, ms]) => new AddsDuringRedisRestart(plans, ms)),
      1,
    ],
    ['replay', selector.map((s) => new Replay(s)), 2],
    ['purge', selector.filter((s) => s.kind !== 'all').map((s) => new Purge(s)), 1],
    ['trim', fc.integer({ min: 1, max: 3 }).map((n) => new Trim(n)), 1],
    ['breaker', fc.boolean().map((open) => new Breaker(open)), 1],
    ['status', fc.constant(new StatusRead()), 2],
    ['rerun', fc.integer({ min: 1, max: 3 }).map((n) => new RerunCompleted(n)), 1],
    [
      'skew-clock',
      fc
        .tuple(
          fc.integer({ min: 0, max: 1 }),
          fc.constantFrom(60_000, -60_000, 3_000, -3_000),
          fc.constantFrom(undefined, 3_600_000),
        )
        .map(([i, skew, max]) => new SkewClock(i, skew, max)),
      1,
    ],
  ];
  const kept = arbs.filter(([name]) => !without.has(name));
  return [fc.oneof(...kept.map(([, arbitrary, weight]) => ({ arbitrary, weight })))];
}

export type { LogicalJob };
