import { DeadLetterQueue } from '../../src/index.js';
import type { Model } from './model.js';
import type { RealSystem } from './system.js';
import { seqsOf, fmtFilter } from './dead-records.js';
import {
  Base,
  showSelector,
  aroundOperator,
  bySeq,
  takenMatches,
  type Selector,
} from './command-base.js';

/**
 * The operators' commands: replay, purge and trim the DLQ while the workers run,
 * each checked against the deaths it took (the rest are in commands.ts).
 */

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
