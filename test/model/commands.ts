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
  type DeadJobFilter,
  type DeadJobRecord,
} from '../../src/index.js';
import { requeueKeys } from '../../src/redis/keys.js';
import { overwrittenKeys, reservedNames } from '../harness/reserved-names.js';
import type { Model } from './model.js';
import { type LogicalJob } from './model.js';
import {
  deathIdentity,
  outcomes,
  type DeathEntry,
  type ModelJobData,
  type Outcome,
} from './protocol.js';
import { workerBreaker, type RealSystem } from './system.js';
import { SkewClock } from './skew-clock.js';

type Cmd = fc.AsyncCommand<Model, RealSystem>;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Every dead record, newest first. */
export async function allDead(dlq: DeadLetterQueue): Promise<DeadJobRecord[]> {
  return dlq.list({}, { offset: 0, limit: 100_000 });
}

/** The logical jobs a dead record carries: its payload's, and those its history names. */
export function seqsOf(record: DeadJobRecord): Set<number> {
  const seqs = new Set<number>();
  const own = (record.data as Partial<ModelJobData> | undefined)?.seq;
  if (typeof own === 'number') seqs.add(own);
  for (const entry of record.history) {
    const seq = (entry.details as { seq?: unknown } | undefined)?.seq;
    if (typeof seq === 'number') seqs.add(seq);
  }
  return seqs;
}

function ownSeq(record: DeadJobRecord): number | undefined {
  const seq = (record.data as Partial<ModelJobData> | undefined)?.seq;
  return typeof seq === 'number' ? seq : undefined;
}

/** Tells the model which deaths it has seen, and which jobs a record absorbed. */
export function observe(m: Model, records: readonly DeadJobRecord[]): void {
  for (const record of records) {
    const own = ownSeq(record);
    for (const seq of seqsOf(record)) {
      const job = m.jobs.get(seq);
      if (!job) continue;
      if (seq === own) job.deaths.add(deathIdentity(record));
      else if (own !== undefined && own !== seq) job.mergedInto = own;
    }
  }
}

function matches(record: DeadJobRecord, filter: DeadJobFilter): boolean {
  if (filter.id !== undefined && record.id !== filter.id && record.idempotencyKey !== filter.id)
    return false;
  if (filter.reason !== undefined && record.reason !== filter.reason) return false;
  return true;
}

const fmtFilter = (f: DeadJobFilter) =>
  f.id !== undefined ? `id=${f.id}` : f.reason !== undefined ? `reason=${f.reason}` : 'all';

/** How an operator picks its dead jobs; an id is picked among the DLQ's at run time. */
type Selector = { kind: 'all' } | { kind: 'id'; pick: number } | { kind: 'reason'; reason: string };

function resolve(selector: Selector, before: readonly DeadJobRecord[]): DeadJobFilter {
  if (selector.kind === 'all') return {};
  if (selector.kind === 'reason') return { reason: selector.reason as DeadJobFilter['reason'] };
  const record = before.length > 0 ? before[selector.pick % before.length] : undefined;
  return { id: record?.id ?? 'k0' };
}

const showSelector = (s: Selector) =>
  s.kind === 'all' ? 'all' : s.kind === 'id' ? `id=#${s.pick}` : `reason=${s.reason}`;

/** A death an operator took: seen in the DLQ before it ran, or dying while it ran. */
interface Taken {
  death: string;
  id: string;
  seq: number | undefined;
  reason: string;
}

/**
 * Removals and replays, seen as the difference between the DLQ before and
 * after. A job that died after the first look and left before the second is
 * known from its death's event: the children record each one.
 */
async function aroundOperator<T>(
  m: Model,
  r: RealSystem,
  selector: Selector,
  op: (filter: DeadJobFilter) => Promise<T>,
) {
  // Deaths numbered up to here happened before this first look: one not in the DLQ now
  // was taken earlier (attributed then) or merged into a newer death of its re-added key.
  const seenUpTo = Number((await r.admin.get(requeueKeys(r.name).deadSequence)) ?? 0);
  const before = await allDead(r.dlq);
  observe(m, before);
  const filter = resolve(selector, before);
  const result = await op(filter);
  // Events come after the state they announce; let the children record them. Read
  // before the DLQ: a death recorded by then is in the DLQ unless the operator took it.
  await sleep(150);
  const recorded = await r.admin.smembers(r.keys.deaths);
  const after = await allDead(r.dlq);
  observe(m, after);
  const afterIds = new Set(after.map(deathIdentity));
  const beforeIds = new Set(before.map(deathIdentity));
  // A death whose id died again meanwhile in a job that was not replayed (a
  // re-added key: the same `replays`) was merged into the newer record by the
  // dead-letter script, not taken by the operator.
  const afterById = new Map(after.map((rec) => [rec.id, rec]));
  /** A newer death of the same id and life whose history carries this one's job. */
  const mergedInto = (death: string, id: string, seq: number | null, replays: number) => {
    const newer = afterById.get(id);
    return (
      newer !== undefined &&
      deathIdentity(newer) !== death &&
      newer.replays <= replays &&
      (seq === null || seqsOf(newer).has(seq))
    );
  };
  const merged = (rec: (typeof before)[number]): boolean =>
    mergedInto(deathIdentity(rec), rec.id, ownSeq(rec) ?? null, rec.replays);
  const gone = before.filter((rec) => !afterIds.has(deathIdentity(rec)) && !merged(rec));
  const matched = before.filter((rec) => matches(rec, filter));
  const taken: Taken[] = gone.map((rec) => ({
    death: deathIdentity(rec),
    id: rec.id,
    seq: ownSeq(rec),
    reason: rec.reason,
  }));
  const inWindow = new Map<string, Taken>();
  for (const raw of recorded) {
    const d = JSON.parse(raw) as DeathEntry;
    if (beforeIds.has(d.death) || afterIds.has(d.death) || m.attributed.has(d.death)) continue;
    const gen = /#g(\d+)$/.exec(d.death)?.[1];
    if (gen !== undefined && Number(gen) <= seenUpTo) continue;
    // Died and then died again under the same id within the window (a key re-added
    // after its job died): the dead-letter script merged this death into the newer
    // one, which is still there.
    if (d.replays !== undefined && mergedInto(d.death, d.id, d.seq, d.replays)) continue;
    inWindow.set(d.death, { death: d.death, id: d.id, seq: d.seq ?? undefined, reason: d.reason });
  }
  taken.push(...inWindow.values());
  for (const t of taken) m.attributed.add(t.death);
  return { before, after, filter, result, gone, matched, taken };
}

/** The logical jobs behind the deaths an operator took, each with how many of its deaths it took. */
function bySeq(m: Model, taken: readonly Taken[]): Map<LogicalJob, Taken[]> {
  const out = new Map<LogicalJob, Taken[]>();
  for (const t of taken) {
    const job = t.seq === undefined ? undefined : m.jobs.get(t.seq);
    if (!job) continue;
    job.deaths.add(t.death);
    out.set(job, [...(out.get(job) ?? []), t]);
  }
  return out;
}

const takenMatches = (t: Taken, filter: DeadJobFilter) =>
  (filter.id === undefined || t.id === filter.id) &&
  (filter.reason === undefined || t.reason === filter.reason);

abstract class Base implements Cmd {
  check(m: Readonly<Model>): boolean {
    void m;
    return true;
  }
  async run(m: Model, r: RealSystem): Promise<void> {
    m.step += 1;
    r.journal.push(`#${m.step} ${this.toString()}`);
    await this.act(m, r);
  }
  protected abstract act(m: Model, r: RealSystem): Promise<void>;
  abstract toString(): string;
}

const showPlan = (plan: Outcome[][]) => plan.map((life) => life.join('>')).join(' | ');

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

export class Replay extends Base {
  constructor(readonly selector: Selector) {
    super();
  }
  protected async act(m: Model, r: RealSystem): Promise<void> {
    const seen = await aroundOperator(m, r, this.selector, (filter) => r.dlq.replay(filter));
    const { result, filter, taken, matched } = seen;
    const label = `#${m.step} replay(${fmtFilter(filter)})`;
    for (const t of taken) {
      if (!takenMatches(t, filter) && t.id !== filter.id) {
        m.violations.push(`${label} took dead job ${t.id} (${t.reason}), which it does not match`);
      }
    }
    const jobs = bySeq(m, taken);
    for (const [job, deaths] of jobs) {
      // One replay works on the dead jobs as they were when it started: one death each.
      if (deaths.length > 1) {
        m.violations.push(
          `${label} replayed seq ${job.seq} ${deaths.length} times (deaths ${deaths.map((d) => d.death).join(', ')})`,
        );
      }
      job.replays += 1;
    }
    const renamed = 'renamed' in result ? (result.renamed as { from: string; to: string }[]) : [];
    for (const { from, to } of renamed) {
      for (const [job, deaths] of jobs) if (deaths.some((d) => d.id === from)) job.ids.add(to);
    }
    if (result.done > jobs.size && !m.disturbedYet) {
      m.violations.push(
        `${label} reported ${result.done} jobs replayed, but ${jobs.size} left the DLQ (${matched.length} matched when it started)`,
      );
    }
    r.journal.push(
      `   ${label}: done ${result.done}/${result.total}, matched ${matched.length}, took ${taken.map((t) => t.death).join(' ')}, renamed ${JSON.stringify(renamed)}`,
    );
  }
  toString(): string {
    return `replay(${showSelector(this.selector)})`;
  }
}

export class Purge extends Base {
  constructor(readonly selector: Selector) {
    super();
  }
  protected async act(m: Model, r: RealSystem): Promise<void> {
    const { result, filter, taken } = await aroundOperator(m, r, this.selector, (filter) =>
      r.dlq.purge(filter),
    );
    const label = `#${m.step} purge(${fmtFilter(filter)})`;
    m.removals.push({
      kind: 'purge',
      at: m.step,
      ...(filter.reason !== undefined ? { reason: filter.reason } : {}),
      ...(filter.id !== undefined ? { ids: new Set([filter.id]) } : {}),
    });
    for (const t of taken) {
      if (!takenMatches(t, filter) && t.id !== filter.id) {
        m.violations.push(
          `${label} removed dead job ${t.id} (${t.reason}), which it does not match`,
        );
      }
    }
    for (const job of bySeq(m, taken).keys()) job.removed = 'purged';
    if (result.done < taken.length && !m.disturbedYet) {
      m.violations.push(
        `${label} reported ${result.done} removed, but ${taken.length} dead jobs left the DLQ`,
      );
    }
    r.journal.push(`   ${label}: done ${result.done}, took ${taken.map((t) => t.death).join(' ')}`);
  }
  toString(): string {
    return `purge(${showSelector(this.selector)})`;
  }
}

export class Trim extends Base {
  constructor(readonly maxCount: number) {
    super();
  }
  protected async act(m: Model, r: RealSystem): Promise<void> {
    const trimmer = new DeadLetterQueue(r.name, {
      connection: r.admin,
      retention: { maxCount: this.maxCount },
    });
    try {
      const { result, gone, taken } = await aroundOperator(m, r, { kind: 'all' }, () =>
        trimmer.applyRetention(),
      );
      m.removals.push({ kind: 'trim', at: m.step });
      for (const job of bySeq(m, taken).keys()) job.removed = 'trimmed';
      for (const rec of gone) {
        for (const seq of seqsOf(rec)) {
          const job = m.jobs.get(seq);
          if (job) job.removed = 'trimmed';
        }
      }
      if (result < gone.length) {
        m.violations.push(
          `#${m.step} applyRetention(maxCount=${this.maxCount}) reported ${result} removed, but ${gone.length} dead jobs left the DLQ`,
        );
      }
      r.journal.push(`   applyRetention: reported ${result}, left the DLQ ${gone.length}`);
    } finally {
      await trimmer.close();
    }
  }
  toString(): string {
    return `applyRetention(maxCount=${this.maxCount})`;
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
