/**
 * The delivery log of a webhook queue in Redis: every attempt of every
 * message to every endpoint, searchable by message, endpoint, event type,
 * status and outcome, kept for a retention (30 days by default) enforced on
 * time by a fleet-wide pass.
 *
 * Layout (`deliveryLogKeys`): each entry is a JSON string
 * `requeue:{q}:dlog:e:<id>` that expires with the retention, indexed by its
 * time in `requeue:{q}:dlog`, `…:dlog:m:<messageId>` and
 * `…:dlog:p:<endpointId>` (each index expires with the retention after its
 * last write too). One write is one MULTI of 7 commands; retention is
 * `trimDeliveryLog-2.lua`, 1,000 entries per script under a token lock.
 */
import { trimDeliveryLog } from '../../src/redis/lua-commands-webhook.js';
import { z } from 'zod';
import type { RedisClient } from '../../src/redis/connection.js';
import { deliveryLogKeys } from '../../src/redis/keys.js';
import { limits } from '../../src/policy/limits.js';
import type { RetentionPass } from '../../src/scheduler/dlq/retention-pass.js';
import { newJobId, systemClock, type Clock } from '../../src/util/system.js';
import {
  entryMember,
  matchesQuery,
  maxExcerptBytes,
  memberEntryId,
  parseEntry,
  type DeliveryLogEntry,
  type DeliveryLogQuery,
} from './delivery-log-entry.js';

const day = 24 * 3600 * 1000;

/** Options of the delivery log, with their defaults. */
export const deliveryLogOptionsSchema = z
  .strictObject({
    /** How long entries are kept, in ms. @defaultValue 30 days */
    retentionMs: z
      .number()
      .int()
      .min(1_000)
      .max(365 * day)
      .default(30 * day),
    /** Bytes of each response body an entry keeps. @defaultValue `256` */
    excerptBytes: z.number().int().min(0).max(maxExcerptBytes).default(256),
    /** How often each worker runs the retention pass, in ms. @defaultValue `60_000` */
    intervalMs: z.number().int().min(10).max(limits.timeoutMs).default(60_000),
  })
  .prefault({});
export type DeliveryLogOptions = z.output<typeof deliveryLogOptionsSchema>;
export type DeliveryLogOptionsInput = z.input<typeof deliveryLogOptionsSchema>;

/** Entries removed per retention script. */
export const logTrimBatch = 1_000;
/** How long a retention pass holds the fleet's lock after a full batch, in ms. */
const logTrimLockMs = 5_000;
/** Index members a search reads at most per call; it answers with a cursor to go on. */
export const maxScanPerSearch = 2_000;

/** A page of a search: newest first; `next` continues it when more may match. */
export interface DeliveryLogPage {
  entries: DeliveryLogEntry[];
  next: string | null;
}

/** The entry as written: everything but its id, which the log gives. */
export type NewDeliveryLogEntry = Omit<DeliveryLogEntry, 'id'>;

/** One queue's delivery log. */
export class DeliveryLog {
  readonly options: DeliveryLogOptions;
  private readonly keys: ReturnType<typeof deliveryLogKeys>;
  private readonly clock: Clock;

  constructor(
    private readonly redis: RedisClient,
    readonly queue: string,
    options: DeliveryLogOptionsInput = {},
    { clock = systemClock, prefix }: { clock?: Clock; prefix?: string } = {},
  ) {
    this.options = deliveryLogOptionsSchema.parse(options);
    this.keys = deliveryLogKeys(queue, prefix);
    this.clock = clock;
  }

  /** Stores one entry (one MULTI); resolves with it. */
  async write(input: NewDeliveryLogEntry): Promise<DeliveryLogEntry> {
    const entry: DeliveryLogEntry = { id: newJobId(), ...input };
    const member = entryMember(entry);
    const ttl = Math.max(1, entry.at + this.options.retentionMs - this.clock.now());
    const { index, byMessage, byEndpoint } = this.keys;
    await this.redis
      .multi()
      .set(this.keys.entry(entry.id), JSON.stringify(entry), 'PX', ttl)
      .zadd(index, entry.at, member)
      .pexpire(index, this.options.retentionMs)
      .zadd(byMessage(entry.messageId), entry.at, member)
      .pexpire(byMessage(entry.messageId), ttl)
      .zadd(byEndpoint(entry.endpointId), entry.at, member)
      .pexpire(byEndpoint(entry.endpointId), this.options.retentionMs)
      .exec()
      .then(throwFirstError);
    return entry;
  }

  /**
   * Entries matching `query`, newest first, at most `limit`. It walks the
   * narrowest index (the message's, else the endpoint's, else the whole
   * log) from `cursor`, reading at most {@link maxScanPerSearch} members;
   * `next` goes on from where it stopped. Reads only.
   */
  async search(
    query: DeliveryLogQuery,
    { limit = 50, cursor }: { limit?: number; cursor?: string | undefined } = {},
  ): Promise<DeliveryLogPage> {
    const key =
      query.messageId !== undefined
        ? this.keys.byMessage(query.messageId)
        : query.endpointId !== undefined
          ? this.keys.byEndpoint(query.endpointId)
          : this.keys.index;
    let position = parseCursor(cursor);
    const entries: DeliveryLogEntry[] = [];
    let scanned = 0;
    while (entries.length < limit && scanned < maxScanPerSearch) {
      const batch = Math.min(200, maxScanPerSearch - scanned);
      const reply = await this.redis.zrevrangebyscore(
        key,
        position ? position.score : '+inf',
        '-inf',
        'WITHSCORES',
        'LIMIT',
        0,
        batch + (position ? 50 : 0),
      );
      const members = pairs(reply).filter((m) => !position || before(m, position));
      if (members.length === 0) return { entries, next: null };
      const page = members.slice(0, batch);
      scanned += page.length;
      const raw = await this.redis.mget(page.map((m) => this.keys.entry(memberEntryId(m.member))));
      for (let i = 0; i < page.length; i++) {
        position = page[i]!;
        const entry = parseEntry(raw[i] ?? null);
        if (entry && matchesQuery(entry, query)) entries.push(entry);
        if (entries.length === limit) {
          const more = i < members.length - 1;
          return { entries, next: more ? cursorOf(position) : null };
        }
      }
      if (members.length < batch) return { entries, next: null };
    }
    return { entries, next: position ? cursorOf(position) : null };
  }

  /** One retention pass: entries older than the retention, in batches, one pass at a time for the fleet. */
  async retentionPass(signal?: AbortSignal): Promise<RetentionPass> {
    const token = newJobId();
    const cutoff = this.clock.now() - this.options.retentionMs;
    const batch = (limit: number) =>
      trimDeliveryLog(
        this.redis,
        [this.keys.index, this.keys.trimLock],
        [this.keys.base, cutoff, limit, token, logTrimLockMs],
      );
    let removed = 0;
    for (;;) {
      const [n, lockLeft] = await batch(logTrimBatch);
      if (n === -1) {
        if (removed > 0) break;
        return { kind: 'busy', retryInMs: Math.max(0, lockLeft) };
      }
      removed += n;
      if (n < logTrimBatch) break;
      if (signal?.aborted) {
        await batch(0);
        break;
      }
    }
    return { kind: 'done', removed: { byAge: removed, byCount: 0 } };
  }
}

interface Position {
  score: number;
  member: string;
}

function cursorOf(position: Position): string {
  return `${position.score}:${position.member}`;
}

function parseCursor(cursor: string | undefined): Position | undefined {
  if (cursor === undefined) return undefined;
  const colon = cursor.indexOf(':');
  const score = Number(cursor.slice(0, colon));
  if (colon < 1 || !Number.isFinite(score)) throw new RangeError('cursor is not one this log gave');
  return { score, member: cursor.slice(colon + 1) };
}

/** Whether `m` comes after `position` in newest-first order (ties: reverse member order, as Redis has them). */
function before(m: Position, position: Position): boolean {
  return m.score < position.score || (m.score === position.score && m.member < position.member);
}

function pairs(reply: string[]): Position[] {
  const out: Position[] = [];
  for (let i = 0; i + 1 < reply.length; i += 2)
    out.push({ member: reply[i]!, score: Number(reply[i + 1]) });
  return out;
}

function throwFirstError(results: [Error | null, unknown][] | null): void {
  for (const [err] of results ?? []) if (err) throw err;
}
