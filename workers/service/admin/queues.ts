import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { AdminPluginOptions } from './context.js';
import { queueParams } from './schemas.js';

/** `GET /queues` and `GET /queues/:queue`: every queue, or one, with its counts. */
export const queuesRoutes: FastifyPluginAsyncZod<AdminPluginOptions> = async (api, { ctx }) => {
  api.get('/queues', { schema: { summary: 'Every queue with its counts' } }, async () => ({
    queues: await Promise.all(
      [...ctx.stores.values()].map(async (q) => ({
        name: q.name,
        kind: q.kind,
        source: q.source ?? null,
        counts: await q.queue.counts(),
        breaker: q.breaker !== undefined,
        budget: q.budget?.kind ?? null,
      })),
    ),
  }));

  api.get(
    '/queues/:queue',
    { schema: { summary: 'One queue with its counts', params: queueParams } },
    async (request) => {
      const q = ctx.storesOf(request.params.queue);
      return {
        name: q.name,
        kind: q.kind,
        source: q.source ?? null,
        counts: await q.queue.counts(),
      };
    },
  );
};
