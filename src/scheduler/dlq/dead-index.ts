import type { RedisClient } from '../../redis/connection.js';
import * as lua from '../../redis/lua-commands.js';
import { lookupIds } from '../job-id.js';
import {
  byTimeOnly,
  fieldsFor,
  matchesFilter,
  metaTags,
  parseRecord,
  parseRef,
  recordFields,
  type DeadJobFilter,
  type DeadJobRecord,
  type DeadRef,
  type RawFields,
} from './dead-record.js';

/** A page of dead jobs: at most `limit`, after skipping `offset`. @defaultValue `{ offset: 0, limit: 50 }` */
export interface DeadPage {
  offset?: number;
  limit?: number;
}

/** Index entries read per round trip of a {@link DeadIndex.scan}. */
const scanPageSize = 1000;

/**
 * The reading side of one queue's DLQ: the index (a sorted set of dead ids
 * scored by death time) and the records it points to. Reads only.
 */
export class DeadIndex {
  constructor(
    private readonly redis: RedisClient,
    private readonly source: string,
    private readonly keys: { readonly dead: string; readonly deadRecordPrefix: string },
  ) {}

  /** The records of `ids`, in their order; undefined for one that is gone or unreadable. */
  async read(ids: readonly string[]): Promise<(DeadJobRecord | undefined)[]> {
    if (ids.length === 0) return [];
    const pipeline = this.redis.pipeline();
    for (const id of ids) pipeline.hmget(this.keys.deadRecordPrefix + id, ...recordFields);
    const replies = (await pipeline.exec()) ?? [];
    return ids.map((id, i) => parseRecord(this.source, id, replies[i]?.[1] as RawFields));
  }

  /** One dead job by its idempotency key — or by its id — or undefined (see {@link lookupIds}). */
  async find(id: string): Promise<DeadJobRecord | undefined> {
    const records = await this.read(lookupIds(id));
    return records.find((r) => r !== undefined);
  }

  /**
   * A page of the records matching `filter`, newest first, and how many
   * match in all when `withTotal`: by the index alone when only times
   * filter, else with one {@link scan}, which stops at the page's end
   * without a total.
   */
  async page(
    filter: DeadJobFilter,
    page: DeadPage,
    withTotal: boolean,
  ): Promise<{ total: number; items: DeadJobRecord[] }> {
    const offset = page.offset ?? 0;
    const limit = page.limit ?? 50;
    if (byTimeOnly(filter)) {
      // One page read (a dashboard polls this).
      const [ids, total] = await Promise.all([
        this.pageIds(filter, offset, limit),
        withTotal ? this.countByTime(filter) : 0,
      ]);
      return { total, items: defined(await this.read(ids)) };
    }
    const refs: DeadRef[] = [];
    let total = 0;
    for await (const ref of this.scan(filter)) {
      if (total >= offset && refs.length < limit) refs.push(ref);
      total += 1;
      if (!withTotal && refs.length >= limit) break;
    }
    return { total, items: defined(await this.read(refs.map((r) => r.id))) };
  }

  /** How many deaths fall in `filter`'s times (its other fields are not looked at). */
  countByTime(filter: DeadJobFilter): Promise<number> {
    if (filter.since === undefined && filter.until === undefined)
      return this.redis.zcard(this.keys.dead);
    return this.redis.zcount(this.keys.dead, ...scoreRange(filter));
  }

  /**
   * The ids of one page of the deaths in `filter`'s times, newest death
   * first, deaths of the same millisecond in the order they died (by
   * generation): the same order as {@link scan}, wherever the page's edges
   * fall. The index itself orders such ties by id, so the deaths of the
   * page's first and last milliseconds are read whole and placed by
   * generation.
   */
  private async pageIds(filter: DeadJobFilter, offset: number, limit: number): Promise<string[]> {
    const [min, max] = scoreRange(filter);
    // One read-only script: read in steps, a death landing between them shifted the page.
    const [raw, above, firstGroup, lastGroup] = await lua.deadPage(this.redis, this.keys.dead, [
      max,
      min,
      offset,
      limit,
    ]);
    if (raw.length === 0) return [];
    const scoreOf = new Map<string, number>();
    for (let i = 0; i < raw.length; i += 2) scoreOf.set(raw[i]!, Number(raw[i + 1]));
    const first = raw[1]!;
    const last = raw[raw.length - 1]!;
    for (const id of firstGroup) scoreOf.set(id, Number(first));
    for (const id of lastGroup) scoreOf.set(id, Number(last));
    const ordered = await this.byDeathOrder([...scoreOf.keys()], scoreOf);
    const start = offset - above;
    return ordered.slice(start, start + limit);
  }

  /**
   * Matching dead records, newest first, a page per round trip; only the
   * fields filters need are read. Records that cannot be read are skipped.
   */
  async *scan(filter: DeadJobFilter): AsyncGenerator<DeadRef> {
    const fields = fieldsFor(filter);
    if (filter.id !== undefined) {
      const record = await this.find(filter.id);
      if (record && matchesFilter({ ...record, tags: metaTags(record.opts) }, record, filter))
        yield { id: record.id, gen: record.gen, name: record.name, death: record };
      return;
    }
    const [min, max] = scoreRange(filter);
    // Pages by score, newest first. Deaths in the same millisecond straddle a
    // page's edge: the next page starts at that score and skips what was seen.
    // They are yielded a millisecond at a time, in the order they died
    // (the index orders them by id).
    let upper = max;
    let seen = new Set<string>();
    let group: DeadRef[] = [];
    let groupScore = '';
    for (;;) {
      const limit = scanPageSize + seen.size;
      const raw = await this.redis.zrevrangebyscore(
        this.keys.dead,
        upper,
        min,
        'WITHSCORES',
        'LIMIT',
        0,
        limit,
      );
      const entries: [string, string][] = [];
      for (let i = 0; i < raw.length; i += 2)
        if (!seen.has(raw[i]!)) entries.push([raw[i]!, raw[i + 1]!]);
      if (entries.length === 0) {
        yield* byGeneration(group);
        return;
      }
      const pipeline = this.redis.pipeline();
      for (const [id] of entries) pipeline.hmget(this.keys.deadRecordPrefix + id, ...fields);
      const replies = (await pipeline.exec()) ?? [];
      for (let i = 0; i < entries.length; i += 1) {
        const [id, score] = entries[i]!;
        if (score !== groupScore) {
          yield* byGeneration(group);
          group = [];
          groupScore = score;
        }
        const ref = parseRef(id, replies[i]?.[1] as RawFields);
        if (ref && matchesFilter(ref, ref.death, filter)) group.push(ref);
      }
      if (raw.length / 2 < limit) {
        yield* byGeneration(group);
        return;
      }
      const lastScore = entries.at(-1)![1];
      const atLast = entries.filter(([, score]) => score === lastScore).map(([id]) => id);
      seen = lastScore === upper ? new Set([...seen, ...atLast]) : new Set(atLast);
      upper = lastScore;
    }
  }

  /** `ids` newest death first, deaths of one millisecond by generation, newest first. */
  private async byDeathOrder(ids: string[], scoreOf: Map<string, number>): Promise<string[]> {
    const scores = new Set(scoreOf.values());
    if (scores.size === ids.length) return ids.sort((a, b) => scoreOf.get(b)! - scoreOf.get(a)!);
    const pipeline = this.redis.pipeline();
    for (const id of ids) pipeline.hget(this.keys.deadRecordPrefix + id, 'gen');
    const replies = (await pipeline.exec()) ?? [];
    const genOf = new Map(ids.map((id, i) => [id, Number(replies[i]?.[1] ?? -1)]));
    return ids.sort((a, b) => scoreOf.get(b)! - scoreOf.get(a)! || genOf.get(b)! - genOf.get(a)!);
  }
}

/**
 * The deaths of one millisecond, the last to die first. The index scores by
 * death time, so such deaths come back in the order of their ids (random
 * within a millisecond); their generations give the order they died in.
 */
function byGeneration(group: DeadRef[]): DeadRef[] {
  return group.length < 2 ? group : group.sort((a, b) => Number(b.gen) - Number(a.gen));
}

/** The index's score range for a filter's times: [min, max] for ZREVRANGEBYSCORE. */
function scoreRange(filter: DeadJobFilter): [string, string] {
  const min = filter.since !== undefined ? String(filter.since) : '-inf';
  const max = filter.until !== undefined ? `(${filter.until}` : '+inf';
  return [min, max];
}

function defined(records: (DeadJobRecord | undefined)[]): DeadJobRecord[] {
  return records.filter((r): r is DeadJobRecord => r !== undefined);
}
