import { type DeadJobFilter, type DeadJobRecord, type DeadLetterQueue } from '../../src/index.js';
import type { Model } from './model.js';
import { deathIdentity, type ModelJobData } from './protocol.js';

/**
 * The DLQ as the model reads it: every dead record, the logical jobs a record
 * carries, and what the model learns from the records it sees.
 */

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

export function ownSeq(record: DeadJobRecord): number | undefined {
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

export function matches(record: DeadJobRecord, filter: DeadJobFilter): boolean {
  if (filter.id !== undefined && record.id !== filter.id && record.idempotencyKey !== filter.id)
    return false;
  if (filter.reason !== undefined && record.reason !== filter.reason) return false;
  return true;
}

export const fmtFilter = (f: DeadJobFilter) =>
  f.id !== undefined ? `id=${f.id}` : f.reason !== undefined ? `reason=${f.reason}` : 'all';
