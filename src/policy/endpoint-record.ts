/**
 * A webhook endpoint as registered: its schema (validated on the way in and
 * back out of Redis), the event-type filter it subscribes with, and the view
 * of it that may be shown (secrets and secret headers blanked). Pure.
 */
import { z } from 'zod';
import { censor, defaultSecretHeaders, isSecretKey, redactUrl } from '../util/redact.js';
import { retryPolicySchema } from './retry-policy.js';
import { secretProblem } from './webhook-secret.js';

/** Bounds of an endpoint's fields. */
export const endpointBounds = Object.freeze({
  /** Characters of an event type or a type filter. */
  eventType: 200,
  /** Type filters of one endpoint. */
  types: 256,
  /** Signing secrets at once (a rotation's overlap). */
  secrets: 10,
  /** Custom headers of one endpoint. */
  headers: 50,
  /** Metadata entries, and characters of each value. */
  metadata: 50,
  metadataValue: 1_000,
  description: 1_000,
  /** Deliveries per second of one endpoint's rate limit. */
  ratePerSecond: 10_000,
});

/** An endpoint id: it names the endpoint in the breaker, the disabled set and its rate limit. */
export const endpointIdSchema = z
  .string()
  .regex(/^[^\s/]{1,200}$/, 'must be 1–200 characters, without spaces or "/"');

/** An http(s) URL. */
export const endpointUrlSchema = z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' });

/** A Standard Webhooks secret; the message names the problem, never the secret. */
export const webhookSecretSchema = z.string().superRefine((secret, ctx) => {
  const problem = secretProblem(secret);
  if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
});

/** A header name (RFC 9110 token). */
export const headerNameSchema = z
  .string()
  .regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'must be an HTTP header name');

/** A header value without control characters. */
export const headerValueSchema = z
  .string()
  .regex(/^[\t\x20-\x7e\x80-\xff]*$/, 'must not contain control characters');

/** An event type: visible ASCII, bounded. */
export const eventTypeSchema = z
  .string()
  .regex(
    new RegExp(`^[\\x21-\\x7e]{1,${endpointBounds.eventType}}$`),
    `must be 1–${endpointBounds.eventType} visible ASCII characters`,
  );

/** A type filter: an exact type, `*`, or a prefix wildcard `invoice.*`. */
const typeFilterSchema = eventTypeSchema.refine(
  (filter) => !filter.includes('*') || filter === '*' || /^[^*]+\.\*$/.test(filter),
  'a wildcard must be "*" or end a filter as ".*" (e.g. "invoice.*")',
);

/** A rate limit: deliveries per second, fleet-wide, with a burst. */
export const rateLimitSchema = z.strictObject({
  /** Deliveries per second (fractions allowed: 0.5 is one every 2 s). */
  perSecond: z.number().positive().max(endpointBounds.ratePerSecond),
  /** Deliveries that may go at once after a quiet spell. @defaultValue `max(1, ceil(perSecond))` */
  burst: z.int().min(1).max(endpointBounds.ratePerSecond).optional(),
});

/** What a caller gives to create an endpoint (and, every field optional, to update one). */
export const endpointFieldsSchema = z.strictObject({
  url: endpointUrlSchema,
  /** Signing secrets; more than one during a rotation (each signs every request). */
  secrets: z.array(webhookSecretSchema).min(1).max(endpointBounds.secrets).optional(),
  description: z.string().max(endpointBounds.description).optional(),
  /** Event types it subscribes to (exact or `a.*`); none or empty: every type. */
  types: z.array(typeFilterSchema).max(endpointBounds.types).optional(),
  headers: z
    .record(headerNameSchema, headerValueSchema)
    .refine((h) => Object.keys(h).length <= endpointBounds.headers, {
      error: `at most ${endpointBounds.headers} headers`,
    })
    .optional(),
  /** Header names whose values are credentials: blanked in every view, scrubbed from echoes. */
  secretHeaders: z.array(headerNameSchema).max(endpointBounds.headers).optional(),
  rateLimit: rateLimitSchema.optional(),
  /** This endpoint's retry schedule, over the worker's. */
  policy: retryPolicySchema.optional(),
  metadata: z
    .record(z.string().min(1).max(200), z.string().max(endpointBounds.metadataValue))
    .refine((m) => Object.keys(m).length <= endpointBounds.metadata, {
      error: `at most ${endpointBounds.metadata} entries`,
    })
    .optional(),
});

/** The fields of an endpoint as a caller writes them. */
export type EndpointFieldsInput = z.input<typeof endpointFieldsSchema>;

/** The stored record: the fields, its id and when it was created and last changed. */
export const endpointRecordSchema = endpointFieldsSchema.extend({
  id: endpointIdSchema,
  createdAt: z.number(),
  updatedAt: z.number(),
});

/** A registered endpoint. */
export type EndpointRecord = z.output<typeof endpointRecordSchema>;

/** An update: any field; `null` clears an optional one. */
export const endpointUpdateSchema = z.strictObject(
  Object.fromEntries(
    Object.entries(endpointFieldsSchema.shape).map(([name, schema]) => [
      name,
      name === 'url' ? schema.optional() : (schema as z.ZodOptional<z.ZodType>).unwrap().nullish(),
    ]),
  ) as Record<string, z.ZodType>,
);

/** What an update may carry (see `endpointUpdateSchema`). */
export type EndpointUpdate = Partial<{
  [K in keyof EndpointFieldsInput]: EndpointFieldsInput[K] | null;
}>;

/** The record after `update`: given fields replace, `null` clears, absent ones stay. */
export function mergeEndpoint(
  record: EndpointRecord,
  update: EndpointUpdate,
  now: number,
): Record<string, unknown> {
  const merged: Record<string, unknown> = { ...record, updatedAt: now };
  for (const [name, value] of Object.entries(update)) {
    if (value === null) delete merged[name];
    else if (value !== undefined) merged[name] = value;
  }
  return merged;
}

/** Whether an endpoint subscribed with `filters` wants events of `type`. */
export function subscribes(filters: readonly string[] | undefined, type: string): boolean {
  if (filters === undefined || filters.length === 0) return true;
  return filters.some((filter) =>
    filter === '*'
      ? true
      : filter.endsWith('.*')
        ? type.startsWith(filter.slice(0, -1))
        : filter === type,
  );
}

/** The burst of a rate limit: given, or one second's worth (at least 1). */
export function rateBurst(limit: z.output<typeof rateLimitSchema>): number {
  return limit.burst ?? Math.max(1, Math.ceil(limit.perSecond));
}

/**
 * An endpoint as it may be shown (CLI, admin API, logs): each secret
 * blanked (their count kept, so a rotation's overlap shows), the values of
 * secret headers blanked, the URL's credentials blanked.
 */
export function endpointView(record: EndpointRecord): Record<string, unknown> {
  const secretNames = [...defaultSecretHeaders, ...(record.secretHeaders ?? [])].map((n) =>
    n.toLowerCase(),
  );
  const headers = record.headers
    ? Object.fromEntries(
        Object.entries(record.headers).map(([name, value]) => [
          name,
          isSecretKey(name, secretNames) ? censor : value,
        ]),
      )
    : undefined;
  return {
    ...record,
    url: redactUrl(record.url),
    ...(record.secrets ? { secrets: record.secrets.map(() => censor) } : {}),
    ...(headers ? { headers } : {}),
  };
}
