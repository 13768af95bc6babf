import { z } from 'zod';
import { deadReasons, type DeadReason } from '../../errors/dead-reason.js';
import { attemptRecordSchema, parseJobState } from '../../policy/job-state.js';
import { isObject, parseJson } from '../../util/json.js';

/** A dead job as the DLQ keeps it: everything needed to inspect and replay it. */
export const deadJobRecordSchema = z.object({
  /** The source queue. */
  source: z.string(),
  /** The job's id in the source queue (also its id in the DLQ). */
  id: z.string(),
  /** This death's generation: unique per death; replay and purge act only on the death they read. */
  gen: z.string(),
  name: z.string(),
  data: z.unknown(),
  /** The job's original options, requeue's meta included. */
  opts: z.record(z.string(), z.unknown()),
  idempotencyKey: z.string().optional(),
  reason: z.enum(deadReasons),
  /** The last error's message, or why the job died. */
  message: z.string(),
  /** Attempts in the life that ended here. */
  attempts: z.number().int(),
  history: z.array(attemptRecordSchema),
  firstFailedAt: z.number().optional(),
  deadAt: z.number(),
  /** How many times this job had already been replayed. */
  replays: z.number().int().default(0),
});
export type DeadJobRecord = z.infer<typeof deadJobRecordSchema>;

/** The death itself, as stored in the record's `dead` field. */
export const deathSchema = z.object({
  reason: z.enum(deadReasons),
  message: z.string(),
  attempts: z.number().int(),
  deadAt: z.number(),
  firstFailedAt: z.number().optional(),
});
export type StoredDeath = z.infer<typeof deathSchema>;

/** Which dead jobs an operation applies to. */
export interface DeadJobFilter {
  id?: string;
  reason?: DeadReason;
  name?: string;
  /** Dead at or after this time (ms since epoch). */
  since?: number;
  /** Dead before this time (ms since epoch). */
  until?: number;
  /** Jobs whose tags (`AddOptions.tags`) include every one of these, e.g. `{ endpoint: 'acme' }`. */
  tags?: Record<string, string>;
}

/** A dead record located: its id, its death generation and what filters look at. */
export interface DeadRef {
  id: string;
  gen: string;
  name: string;
  death: StoredDeath;
  /** The job's tags (requeue's meta), if it has any. */
  tags?: Record<string, string>;
}

/** The fields of a dead record's hash that make up a {@link DeadJobRecord}, in {@link parseRecord}'s order. */
export const recordFields = ['name', 'data', 'opts', 'rq', 'rql', 'gen', 'dead'] as const;
/** The fields a filter needs, in {@link parseRef}'s order (`opts` only when it selects by tags). */
export const filterFields = ['name', 'gen', 'dead', 'opts'] as const;

/** The {@link filterFields} `filter` needs: a job's options are read only to match its tags. */
export function fieldsFor(filter: DeadJobFilter): readonly string[] {
  return filter.tags === undefined ? filterFields.slice(0, 3) : filterFields;
}

/** An `HMGET` reply: one value per field asked, `null` where absent. */
export type RawFields = readonly (string | null)[] | undefined;

/** Whether `filter` selects by death time alone (or not at all): the index answers it by itself. */
export function byTimeOnly(filter: DeadJobFilter): boolean {
  return (
    filter.id === undefined &&
    filter.reason === undefined &&
    filter.name === undefined &&
    filter.tags === undefined
  );
}

/** The one filter predicate: whether a dead record (its name and its death) matches `filter`'s fields other than `id`. */
export function matchesFilter(
  record: { name: string; tags?: Record<string, string> | undefined },
  death: StoredDeath,
  filter: DeadJobFilter,
): boolean {
  if (filter.tags !== undefined)
    for (const [name, value] of Object.entries(filter.tags))
      if (record.tags?.[name] !== value) return false;
  if (filter.reason !== undefined && death.reason !== filter.reason) return false;
  if (filter.name !== undefined && record.name !== filter.name) return false;
  if (filter.since !== undefined && death.deadAt < filter.since) return false;
  if (filter.until !== undefined && death.deadAt >= filter.until) return false;
  return true;
}

/** A record's `dead` field, or undefined when it does not parse. */
export function parseDeath(raw: string | null | undefined): StoredDeath | undefined {
  const parsed = deathSchema.safeParse(parseJson(raw));
  return parsed.success ? parsed.data : undefined;
}

/** The idempotency key in a job's options (`opts.rq.key`, parsed or as stored), if any. */
export function metaKey(opts: unknown): string | undefined {
  const parsed = typeof opts === 'string' ? parseJson(opts) : opts;
  const key = isObject(parsed) && isObject(parsed.rq) ? parsed.rq.key : undefined;
  return typeof key === 'string' ? key : undefined;
}

/** The tags in a job's options (`opts.rq.tags`, parsed or as stored), if any. */
export function metaTags(opts: unknown): Record<string, string> | undefined {
  const parsed = typeof opts === 'string' ? parseJson(opts) : opts;
  const tags = isObject(parsed) && isObject(parsed.rq) ? parsed.rq.tags : undefined;
  if (!isObject(tags)) return undefined;
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(tags)) if (typeof v === 'string') out[k] = v;
  return out;
}

/** A located record from its {@link filterFields}, or undefined when it cannot be read. */
export function parseRef(id: string, raw: RawFields): DeadRef | undefined {
  const [name, gen, dead, opts] = raw ?? [];
  const death = parseDeath(dead);
  if (name == null || gen == null || !death) return undefined;
  const tags = metaTags(opts);
  return { id, gen, name, death, ...(tags ? { tags } : {}) };
}

/** A whole record from its {@link recordFields}, or undefined when it cannot be read (gone, or not a death). */
export function parseRecord(source: string, id: string, raw: RawFields): DeadJobRecord | undefined {
  if (!raw) return undefined;
  const [name, data, opts, rq, rql, gen, dead] = raw;
  const death = parseDeath(dead);
  if (name == null || gen == null || !death) return undefined;
  const parsedOpts = parseJson(opts);
  const key = metaKey(parsedOpts);
  return {
    source,
    id,
    gen,
    name,
    data: parseJson(data),
    opts: isObject(parsedOpts) ? parsedOpts : {},
    ...(key !== undefined ? { idempotencyKey: key } : {}),
    reason: death.reason,
    message: death.message,
    attempts: death.attempts,
    history: parseJobState(rq)?.history ?? [],
    ...(death.firstFailedAt !== undefined ? { firstFailedAt: death.firstFailedAt } : {}),
    deadAt: death.deadAt,
    replays: Number(rql ?? 0),
  };
}
