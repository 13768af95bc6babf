import type fc from 'fast-check';
import type { DeadJobFilter, DeadJobRecord } from '../../src/index.js';
import { requeueKeys } from '../../src/redis/keys.js';
import type { Model } from './model.js';
import type { LogicalJob } from './model.js';
import { deathIdentity, type DeathEntry, type Outcome } from './protocol.js';
import type { RealSystem } from './system.js';
import { allDead, seqsOf, ownSeq, observe, matches } from './dead-records.js';

/**
 * What the model's commands share: the base class that numbers and journals
 * each step, and the bookkeeping around an operator (replay, purge, trim) that
 * races the workers.
 */

export type Cmd = fc.AsyncCommand<Model, RealSystem>;

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** How an operator picks its dead jobs; an id is picked among the DLQ's at run time. */
export type Selector =
  { kind: 'all' } | { kind: 'id'; pick: number } | { kind: 'reason'; reason: string };

function resolve(selector: Selector, before: readonly DeadJobRecord[]): DeadJobFilter {
  if (selector.kind === 'all') return {};
  if (selector.kind === 'reason') return { reason: selector.reason as DeadJobFilter['reason'] };
  const record = before.length > 0 ? before[selector.pick % before.length] : undefined;
  return { id: record?.id ?? 'k0' };
}

export const showSelector = (s: Selector) =>
  s.kind === 'all' ? 'all' : s.kind === 'id' ? `id=#${s.pick}` : `reason=${s.reason}`;

/** A death an operator took: seen in the DLQ before it ran, or dying while it ran. */
export interface Taken {
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
export async function aroundOperator<T>(
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
export function bySeq(m: Model, taken: readonly Taken[]): Map<LogicalJob, Taken[]> {
  const out = new Map<LogicalJob, Taken[]>();
  for (const t of taken) {
    const job = t.seq === undefined ? undefined : m.jobs.get(t.seq);
    if (!job) continue;
    job.deaths.add(t.death);
    out.set(job, [...(out.get(job) ?? []), t]);
  }
  return out;
}

export const takenMatches = (t: Taken, filter: DeadJobFilter) =>
  (filter.id === undefined || t.id === filter.id) &&
  (filter.reason === undefined || t.reason === filter.reason);

export abstract class Base implements Cmd {
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

export const showPlan = (plan: Outcome[][]) => plan.map((life) => life.join('>')).join(' | ');
