/**
 * Messages: one event fanned out to every registered endpoint that
 * subscribes to its type, one delivery (a job with its own history) each.
 */
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { ConfigError } from '../../src/errors/config-error.js';
import { eventTypeSchema, subscribes } from '../../src/policy/endpoint-record.js';
import type { EndpointRegistry } from '../../src/redis/endpoint-registry.js';
import type { EndpointStore } from '../../src/redis/endpoint-store.js';
import type { RequeueQueue } from '../../src/scheduler/queue.js';
import { parseConfig } from '../../src/util/parse-config.js';
import { systemClock, type Clock } from '../../src/util/system.js';
import { enqueueWebhook, type WebhookJob } from './webhook-worker.js';

/** Bytes of a message's payload, as JSON, unless told otherwise: 256 KiB. */
export const defaultMaxPayloadBytes = 256 * 1024;

/** A message id: it is sent as `webhook-id` (no `.`: the signed content is dot-delimited). */
const messageIdSchema = z
  .string()
  .regex(/^[\x21-\x2d\x2f-\x7e]{1,256}$/, 'must be 1–256 visible ASCII characters, no "."');

/** A message as a caller sends it; `id` makes sending it again a no-op. */
export const messageSchema = z.strictObject({
  type: eventTypeSchema,
  payload: z.json(),
  id: messageIdSchema.optional(),
});

/** A message as a caller writes it. */
export type MessageInput = z.input<typeof messageSchema>;

/** Where a message went. */
export interface SentMessage {
  /** The message id (given, or made): the `webhook-id` of every delivery. */
  id: string;
  /** One delivery per subscribed, enabled endpoint: the endpoint and its delivery's job id. */
  endpoints: { endpointId: string; deliveryId: string }[];
}

/** Options of {@link sendMessage}. */
export interface SendMessageOptions {
  registry: EndpointRegistry;
  /** Disabled endpoints get no delivery. */
  disabled?: EndpointStore;
  /** Largest payload, as JSON bytes. @defaultValue {@link defaultMaxPayloadBytes} */
  maxPayloadBytes?: number;
  clock?: Clock;
  /** Makes an id for a message that brings none. @defaultValue `msg_` + a random UUID */
  newId?: () => string;
}

/**
 * Sends a message: validated (a `ConfigError` names the field), then one
 * delivery per registered endpoint of `queue` whose type filter takes its
 * type and that is not disabled. Each delivery is keyed by (message id,
 * endpoint) in requeue's job-id namespace, so sending the same id again —
 * a client's retry after a timeout — adds nothing twice; the deliveries
 * carry the endpoint's retry policy when it has one.
 */
export async function sendMessage(
  queue: RequeueQueue<WebhookJob> | RequeueQueue<unknown>,
  input: unknown,
  options: SendMessageOptions,
): Promise<SentMessage> {
  const { registry, disabled, clock = systemClock } = options;
  const message = parseConfig(messageSchema, input, 'message');
  const maxBytes = options.maxPayloadBytes ?? defaultMaxPayloadBytes;
  const bytes = Buffer.byteLength(JSON.stringify(message.payload ?? null));
  if (bytes > maxBytes) {
    throw new ConfigError(
      `message.payload: must be at most ${maxBytes} bytes as JSON, got ${bytes}`,
    );
  }
  const id = message.id ?? (options.newId ?? (() => `msg_${randomUUID().replace(/-/g, '')}`))();
  const timestamp = new Date(clock.now()).toISOString();
  const name = queue.name;
  const endpoints = (await registry.list(name)).filter((e) => subscribes(e.types, message.type));
  const enabled = disabled
    ? (
        await Promise.all(
          endpoints.map(async (e) => ((await disabled.isDisabled(name, e.id)) ? undefined : e)),
        )
      ).filter((e) => e !== undefined)
    : endpoints;
  const added = await Promise.all(
    enabled.map((endpoint) =>
      enqueueWebhook(
        queue,
        {
          endpoint: {
            id: endpoint.id,
            url: endpoint.url,
            // Its secrets and headers are read from the record at delivery, never copied here.
            registered: true,
          },
          event: { id, type: message.type, timestamp, payload: message.payload },
        },
        { clock, ...(endpoint.policy ? { policy: endpoint.policy } : {}) },
      ).then((job) => ({ endpointId: endpoint.id, deliveryId: job.id })),
    ),
  );
  return { id, endpoints: added };
}
