import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { limits } from '../../../src/policy/limits.js';
import { deliveryOutcomes, statusFilterSchema } from '../../webhook/delivery-log-entry.js';
import { DeliveryLog } from '../../webhook/delivery-log.js';
import { HttpError } from '../http.js';
import type { AdminPluginOptions } from './context.js';
import { queueParams } from './schemas.js';

/** What a delivery-log search selects; every field narrows it. */
export const deliveriesQuery = z.strictObject({
  message: z.string().min(1).max(256).optional().describe('the message (event) id'),
  endpoint: z.string().min(1).max(200).optional().describe('the endpoint id'),
  type: z.string().min(1).max(200).optional().describe('the event type, exactly'),
  status: statusFilterSchema.optional().describe('an HTTP status, a class like 5xx, or none'),
  outcome: z.enum(deliveryOutcomes).optional(),
  limit: z.coerce.number().int().min(1).max(limits.listLimit).default(50),
  cursor: z
    .string()
    .regex(/^\d{1,15}:\S{1,20} \S{1,200} \S{1,256}$/, 'must be a cursor this API gave')
    .optional(),
});

/** `GET /queues/:queue/deliveries`: the delivery log of a webhook queue, newest first. */
export const deliveriesRoutes: FastifyPluginAsyncZod<AdminPluginOptions> = async (api, { ctx }) => {
  const logs = new Map<string, DeliveryLog>();
  api.get(
    '/queues/:queue/deliveries',
    {
      schema: {
        summary:
          'Delivery log: every attempt (time, status, latency, response excerpt), by message, endpoint, event type, status or outcome',
        params: queueParams,
        querystring: deliveriesQuery,
      },
    },
    async (request) => {
      const q = ctx.storesOf(request.params.queue);
      if (q.kind !== 'webhook')
        throw new HttpError(404, `${q.name} is not a webhook queue: it keeps no delivery log`);
      let log = logs.get(q.name);
      if (!log) logs.set(q.name, (log = new DeliveryLog(ctx.options.redis, q.name)));
      const { message, endpoint, type, status, outcome, limit, cursor } = request.query;
      const page = await log.search(
        { messageId: message, endpointId: endpoint, eventType: type, status, outcome },
        { limit, cursor },
      );
      return ctx.redact({ queue: q.name, ...page });
    },
  );
};
