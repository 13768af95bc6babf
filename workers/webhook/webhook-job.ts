import { z } from 'zod';
import { parseConfig } from '../../src/config/env.js';
import {
  endpointIdSchema,
  endpointUrlSchema,
  eventTypeSchema,
  headerNameSchema,
  headerValueSchema,
  rateLimitSchema,
  webhookSecretSchema,
} from '../../src/policy/endpoint-record.js';
import type { AddedJob, AddOptions, RequeueQueue } from '../../src/scheduler/queue.js';
import { systemClock, type Clock } from '../../src/util/system.js';
import { caSchema } from './tls-ca.js';

/**
 * A webhook job. `endpoint.secret` is a Standard Webhooks secret (`whsec_`
 * + base64 of 24 to 64 bytes), or a list of them during a rotation.
 * `event.id` becomes `webhook-id`; the spec asks that it contain no `.`
 * (the signed content is dot-delimited).
 */
export const webhookJobSchema = z.object({
  endpoint: z.object({
    /** Names the endpoint in the disabled set and the breaker; no `/` ({@link webhookJobKey}). */
    id: endpointIdSchema,
    url: endpointUrlSchema,
    secret: z.union([webhookSecretSchema, z.array(webhookSecretSchema).min(1).max(10)]).optional(),
    /** A CA (PEM) this endpoint's certificate is also checked against: for testing. */
    ca: caSchema.optional(),
    /** Deliveries to this endpoint at once in one worker process (its bulkhead). */
    maxConcurrency: z.number().int().min(1).max(1_000).optional(),
    /** Deliveries per second to it, fleet-wide (a registered endpoint's own limit wins). */
    rateLimit: rateLimitSchema.optional(),
    /** Fanned out from a message to a registered endpoint: its record is read at delivery. */
    registered: z.literal(true).optional(),
  }),
  event: z.object({
    id: z
      .string()
      .regex(/^[\x21-\x2d\x2f-\x7e]{1,256}$/, 'must be 1–256 visible ASCII characters, no "."'),
    type: eventTypeSchema,
    timestamp: z.iso.datetime({ offset: true }).optional(),
    payload: z.json(),
  }),
  headers: z.record(headerNameSchema, headerValueSchema).optional(),
});

/** A validated webhook job. */
export type WebhookJob = z.output<typeof webhookJobSchema>;

/** A webhook job as a producer writes it. */
export type WebhookJobInput = z.input<typeof webhookJobSchema>;

/**
 * The job's idempotency key: `${endpoint.id}/${event.id}`. Scoped by
 * endpoint because one event fans out to many endpoints under the same
 * `webhook-id`; keyed by the event id alone, the second endpoint's job would
 * be dropped as a duplicate.
 */
export function webhookJobKey(job: Pick<WebhookJobInput, 'endpoint' | 'event'>): string {
  return `${job.endpoint.id}/${job.event.id}`;
}

/** The idempotency key of the `n`th resend of a delivery ({@link EnqueueWebhookOptions.resend}). */
export function resendJobKey(job: Pick<WebhookJobInput, 'endpoint' | 'event'>, n: number): string {
  return `${webhookJobKey(job)}.resend-${n}`;
}

/** Options of {@link enqueueWebhook}. */
export interface EnqueueWebhookOptions extends Omit<AddOptions, 'idempotencyKey' | 'dispatchKey'> {
  /** Stamps `event.timestamp` when the job has none. @defaultValue the system clock */
  clock?: Clock;
  /**
   * The job's dispatch key ({@link AddOptions.dispatchKey}): endpoints take
   * turns, so one endpoint's backlog delays only its own events. `false`
   * adds the job first in, first out.
   * @defaultValue `endpoint.id`
   */
  dispatchKey?: string | false;
  /**
   * A resend of a delivered message: its own job, keyed
   * `<endpoint>/<message>.resend-<n>` (a message id has no `.`), with its own history.
   */
  resend?: number;
}

/**
 * Adds a webhook job: validated (a `ConfigError` names the bad field),
 * `event.timestamp` stamped when missing so every attempt sends the same
 * body, and keyed by {@link webhookJobKey} so adding the same event for the
 * same endpoint twice delivers it once. The job's name is the event type.
 * Its dispatch key is the endpoint: endpoints take turns.
 */
export async function enqueueWebhook(
  queue: RequeueQueue<WebhookJob> | RequeueQueue<unknown>,
  job: WebhookJobInput,
  { clock = systemClock, dispatchKey, resend, ...options }: EnqueueWebhookOptions = {},
): Promise<AddedJob> {
  const data = parseConfig(webhookJobSchema, job, 'webhook');
  data.event.timestamp ??= new Date(clock.now()).toISOString();
  // Object.assign rather than spread copies that add fields (microseconds each on Node 20).
  return (queue as RequeueQueue<WebhookJob>).add(
    data.event.type,
    data,
    Object.assign({}, options, {
      idempotencyKey: resend === undefined ? webhookJobKey(data) : resendJobKey(data, resend),
      tags: Object.assign(
        {},
        options.tags,
        { endpoint: data.endpoint.id },
        resend !== undefined && { resend: String(resend) },
      ),
      ...(dispatchKey !== false && { dispatchKey: dispatchKey ?? data.endpoint.id }),
    }),
  );
}
