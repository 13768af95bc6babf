import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { breakerStatusView } from '../../../src/redis/breaker-store.js';
import { endpointView } from '../../../src/policy/endpoint-record.js';
import { EndpointRegistry } from '../../../src/redis/endpoint-registry.js';
import { EndpointStore } from '../../../src/redis/endpoint-store.js';
import { queueBreakerKey } from '../../../src/scheduler/requeue-worker.js';
import { HttpError } from '../http.js';
import type { AdminPluginOptions, QueueStores } from './context.js';
import { endpointDisableBody, endpointParams, queueParams } from './schemas.js';

/**
 * Webhook endpoints: list them — registered, disabled or seen by the
 * breaker — with their record (secrets blanked) and breaker state; disable, enable.
 */
export const endpointsRoutes: FastifyPluginAsyncZod<AdminPluginOptions> = async (api, { ctx }) => {
  const endpoints = new EndpointStore({ connection: ctx.options.redis, cacheTtlMs: 0 });
  const registry = new EndpointRegistry({ connection: ctx.options.redis, cacheTtlMs: 0 });

  api.get(
    '/queues/:queue/endpoints',
    {
      schema: {
        summary:
          'Webhook endpoints registered, disabled or seen by the breaker: record (secrets blanked), state, breaker',
        params: queueParams,
      },
    },
    async (request) => {
      const q = ctx.storesOf(request.params.queue);
      return ctx.redact({ queue: q.name, endpoints: await endpointViews(q) });
    },
  );

  api.post(
    '/queues/:queue/endpoints/:endpointId/disable',
    {
      schema: {
        summary: 'Stop delivering to an endpoint: its jobs dead-letter as endpoint-disabled',
        params: endpointParams,
        body: endpointDisableBody,
      },
    },
    async (request) => {
      const q = ctx.storesOf(request.params.queue);
      const changed = await endpoints.disable(
        q.name,
        request.params.endpointId,
        request.body.reason,
      );
      return { endpointId: request.params.endpointId, disabled: true, changed };
    },
  );

  api.post(
    '/queues/:queue/endpoints/:endpointId/enable',
    {
      schema: {
        summary: 'Deliver to a disabled endpoint again (dead-lettered jobs stay in the DLQ)',
        params: endpointParams,
      },
    },
    async (request) => {
      const q = ctx.storesOf(request.params.queue);
      const id = request.params.endpointId;
      const changed = await endpoints.enable(q.name, id);
      if (
        !changed &&
        !(await q.breakers.knownKeys()).includes(id) &&
        !(await registry.get(q.name, id))
      )
        throw new HttpError(404, `no endpoint "${id}" known in ${q.name}`);
      return { endpointId: id, disabled: false, changed };
    },
  );

  /** Registered endpoints, disabled ones and the keys the breaker has seen (endpoint ids), one row each. */
  async function endpointViews(q: QueueStores) {
    const [disabled, keys, records] = await Promise.all([
      endpoints.list(q.name),
      q.kind === 'webhook' ? q.breakers.knownKeys() : Promise.resolve([]),
      q.kind === 'webhook' ? registry.list(q.name) : Promise.resolve([]),
    ]);
    const byId = new Map(disabled.map((d) => [d.endpointId, d]));
    const registered = new Map(records.map((r) => [r.id, r]));
    const ids = [
      ...new Set([
        ...registered.keys(),
        ...byId.keys(),
        ...keys.filter((k) => k !== queueBreakerKey),
      ]),
    ].sort();
    return Promise.all(
      ids.map(async (endpointId) => {
        const entry = byId.get(endpointId);
        const record = registered.get(endpointId);
        const breaker = keys.includes(endpointId)
          ? breakerStatusView(await q.breakers.status(endpointId))
          : null;
        return {
          endpointId,
          disabled: entry !== undefined,
          reason: entry?.reason ?? null,
          disabledAt: entry?.disabledAt ?? null,
          breaker,
          /** The registered record (secrets and secret headers blanked), or null for a one-off URL. */
          registered: record ? endpointView(record) : null,
        };
      }),
    );
  }
};
