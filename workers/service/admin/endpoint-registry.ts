import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { isEndpointRegistryError } from '../../../src/errors/endpoint-registry-error.js';
import {
  endpointFieldsSchema,
  endpointIdSchema,
  endpointUpdateSchema,
  endpointView,
  type EndpointUpdate,
} from '../../../src/policy/endpoint-record.js';
import { EndpointRegistry } from '../../../src/redis/endpoint-registry.js';
import { createEndpoint, updateEndpoint } from '../../webhook/endpoints.js';
import { HttpError } from '../http.js';
import type { AdminPluginOptions } from './context.js';
import { endpointParams, queueParams } from './schemas.js';

/** A registry refusal as the API answers it: 404 for no such endpoint, 409 for a clash. */
async function answering<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (isEndpointRegistryError(err))
      throw new HttpError(err.code === 'not-found' ? 404 : 409, err.message);
    throw err;
  }
}

/**
 * Registered webhook endpoints: create, show, update (PATCH: given fields
 * replace, `null` clears), delete. Every answer is the endpoint's view:
 * secrets and secret headers blanked. The URL meets the SSRF guard here,
 * with the service's `allowPrivate`, and again at every delivery.
 */
export const endpointRegistryRoutes: FastifyPluginAsyncZod<AdminPluginOptions> = async (
  api,
  { ctx },
) => {
  const registry = new EndpointRegistry({ connection: ctx.options.redis, cacheTtlMs: 0 });
  const writes = ctx.options.endpointWrites ?? {};

  api.post(
    '/queues/:queue/endpoints',
    {
      schema: {
        summary: 'Register a webhook endpoint (URL, secrets, types, headers, rate limit)',
        params: queueParams,
        body: endpointFieldsSchema.extend({ id: endpointIdSchema }),
      },
    },
    async (request, reply) => {
      const q = ctx.storesOf(request.params.queue);
      const { id, ...fields } = request.body;
      const record = await answering(() => createEndpoint(registry, q.name, id, fields, writes));
      return reply.code(201).send(ctx.redact(endpointView(record)));
    },
  );

  api.get(
    '/queues/:queue/endpoints/:endpointId',
    { schema: { summary: 'One registered endpoint (secrets blanked)', params: endpointParams } },
    async (request) => {
      const q = ctx.storesOf(request.params.queue);
      const id = request.params.endpointId;
      const record = await registry.get(q.name, id);
      if (!record) throw new HttpError(404, `no endpoint "${id}" registered in ${q.name}`);
      return ctx.redact(endpointView(record));
    },
  );

  api.patch(
    '/queues/:queue/endpoints/:endpointId',
    {
      schema: {
        summary: 'Change the given fields of an endpoint; null clears one',
        params: endpointParams,
        body: endpointUpdateSchema,
      },
    },
    async (request) => {
      const q = ctx.storesOf(request.params.queue);
      const id = request.params.endpointId;
      const update = request.body as EndpointUpdate;
      const record = await answering(() => updateEndpoint(registry, q.name, id, update, writes));
      return ctx.redact(endpointView(record));
    },
  );

  api.delete(
    '/queues/:queue/endpoints/:endpointId',
    {
      schema: {
        summary: 'Remove an endpoint: its waiting deliveries dead-letter as endpoint-disabled',
        params: endpointParams,
      },
    },
    async (request) => {
      const q = ctx.storesOf(request.params.queue);
      const id = request.params.endpointId;
      if (!(await registry.delete(q.name, id)))
        throw new HttpError(404, `no endpoint "${id}" registered in ${q.name}`);
      return { endpointId: id, deleted: true };
    },
  );
};
