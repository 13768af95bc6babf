/**
 * One entry of the delivery log: what one attempt of one message to one
 * endpoint did, as stored and as searched. Pure: the store is
 * `delivery-log.ts`, the writer `delivery-log-recorder.ts`.
 */
import { z } from 'zod';

/** Bytes of a response body an entry keeps, at most. */
export const maxExcerptBytes = 1_024;
/** Characters of an error message an entry keeps. */
const maxErrorChars = 200;

/**
 * Where the attempt left the delivery: `delivered` (2xx, completed),
 * `retrying` (a retry is scheduled), `dead` (dead-lettered).
 */
export const deliveryOutcomes = ['delivered', 'retrying', 'dead'] as const;
export type DeliveryOutcome = (typeof deliveryOutcomes)[number];

export const deliveryLogEntrySchema = z.object({
  /** The entry's own id: sorts by time. */
  id: z.string(),
  /** When the attempt started, ms since the epoch. */
  at: z.number(),
  /** The message: the event id, sent as `webhook-id`. */
  messageId: z.string(),
  eventType: z.string(),
  endpointId: z.string(),
  jobId: z.string(),
  /** 1-based attempt number within the job's life. */
  attempt: z.number().int(),
  outcome: z.enum(deliveryOutcomes),
  /** The response status, when a response came. */
  status: z.number().int().optional(),
  /** The error code when none came (`ECONNREFUSED`, `CERT_HAS_EXPIRED`, …). */
  code: z.string().optional(),
  /** The classifier's reason of a failure (`tls-certificate`, `http-status`, …) or the dead reason. */
  reason: z.string().optional(),
  /** Why the delivery was dead-lettered (`max-attempts`, `gone`, …), for `dead`. */
  deadReason: z.string().optional(),
  latencyMs: z.number(),
  /** The start of the response body, secrets the request sent blanked, at most `maxExcerptBytes`. */
  excerpt: z.string().optional(),
  /** The failure's message (already scrubbed of what the request sent), at most 200 characters. */
  error: z.string().optional(),
  /** When the next attempt is due, for `retrying`. */
  retryAt: z.number().optional(),
});
export type DeliveryLogEntry = z.infer<typeof deliveryLogEntrySchema>;

/** An entry read back; `undefined` for one that is not JSON or not an entry. */
export function parseEntry(raw: string | null): DeliveryLogEntry | undefined {
  if (raw === null) return undefined;
  try {
    const parsed = deliveryLogEntrySchema.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The index member of an entry: `<id> <endpointId> <messageId>`. Neither id
 * holds a space (the job schema refuses them), so the retention script
 * parses it back into the keys it names.
 */
export function entryMember(entry: Pick<DeliveryLogEntry, 'id' | 'endpointId' | 'messageId'>) {
  return `${entry.id} ${entry.endpointId} ${entry.messageId}`;
}

/** The entry id of an index member. */
export function memberEntryId(member: string): string {
  const space = member.indexOf(' ');
  return space < 0 ? member : member.slice(0, space);
}

/** `text` cut to at most `maxBytes` UTF-8 bytes, never inside a character. */
export function capBytes(text: string, maxBytes: number): string {
  if (Buffer.byteLength(text) <= maxBytes) return text;
  // A cut inside a multi-byte character decodes to U+FFFD: drop it.
  return Buffer.from(text)
    .subarray(0, maxBytes)
    .toString('utf8')
    .replace(/\uFFFD+$/, '');
}

/** An error message as an entry keeps it: one line, at most 200 characters. */
export function capError(message: string): string {
  const line = message.replace(/\s+/g, ' ').trim();
  return line.length <= maxErrorChars ? line : `${line.slice(0, maxErrorChars - 1)}…`;
}

/**
 * A status filter: an HTTP status (`503`), a class (`5xx`), or `none` (no
 * response came: refused, timeout, TLS).
 */
export const statusFilterSchema = z
  .string()
  .regex(/^(?:[1-5][0-9][0-9]|[1-5]xx|none)$/, 'must be an HTTP status, a class like 5xx, or none');

/** What a search selects; every field narrows it. */
export interface DeliveryLogQuery {
  messageId?: string | undefined;
  endpointId?: string | undefined;
  eventType?: string | undefined;
  /** See {@link statusFilterSchema}. */
  status?: string | undefined;
  outcome?: DeliveryOutcome | undefined;
}

/** The one filter predicate of a search. */
export function matchesQuery(entry: DeliveryLogEntry, query: DeliveryLogQuery): boolean {
  if (query.messageId !== undefined && entry.messageId !== query.messageId) return false;
  if (query.endpointId !== undefined && entry.endpointId !== query.endpointId) return false;
  if (query.eventType !== undefined && entry.eventType !== query.eventType) return false;
  if (query.outcome !== undefined && entry.outcome !== query.outcome) return false;
  const { status } = query;
  if (status === undefined) return true;
  if (status === 'none') return entry.status === undefined;
  if (entry.status === undefined) return false;
  return status.endsWith('xx')
    ? Math.floor(entry.status / 100) === Number(status[0])
    : entry.status === Number(status);
}
