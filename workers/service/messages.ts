import type { RedisClient } from '../../src/redis/connection.js';
import { EndpointRegistry } from '../../src/redis/endpoint-registry.js';
import { EndpointStore } from '../../src/redis/endpoint-store.js';
import type { RequeueQueue } from '../../src/scheduler/queue.js';
import { messageSchema, sendMessage } from '../webhook/messages.js';
import type { IntakeOptions } from './http.js';

/**
 * `POST /v1/messages` of the service: the body validated by
 * {@link messageSchema} (a 400 names the field), its payload bounded
 * (`defaultMaxPayloadBytes`), then fanned out by {@link sendMessage}. Answers
 * `{id, endpoints: [{endpointId, deliveryId}]}`.
 */
export function messageIntake(
  queue: RequeueQueue,
  connection: RedisClient,
): NonNullable<IntakeOptions['messages']> {
  // Read at once on every message: a new endpoint gets the next message.
  const registry = new EndpointRegistry({ connection, cacheTtlMs: 0 });
  const disabled = new EndpointStore({ connection });
  return {
    schema: messageSchema,
    send: (message) => sendMessage(queue, message, { registry, disabled }),
  };
}
