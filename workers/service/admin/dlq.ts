import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { deadReasons } from '../../../src/errors/dead-reason.js';
import { HttpError } from '../http.js';
import { deadJobView, toFilter, type AdminPluginOptions } from './context.js';
import { deadBulkBody, deadFilterQuery, deadListQuery, jobParams, queueParams } from './schemas.js';

/**
 * The DLQ: list, count, show, and replay or purge. Replay and purge are the
 * library's fenced moves.
 */
export const dlqRoutes: FastifyPluginAsyncZod<AdminPluginOptions> = async (api, { ctx }) => {
  // The one list (src/errors/dead-reason.ts), for the dashboard's filter.
  api.get(
    '/dlq/reasons',
    { schema: { summary: 'The reasons a job can be dead-lettered, to filter by' } },
    () => ({ reasons: deadReasons }),
  );

  api.get(
    '/queues/:queue/dlq',
    {
      schema: {
        summary: 'Dead jobs, newest first, filtered and paged',
        params: queueParams,
        querystring: deadListQuery,
      },
    },
    async (request) => {
      const q = ctx.storesOf(request.params.queue);
      const { limit, offset, ...rest } = request.query;
      const filter = toFilter(rest);
      const { items, total } = await q.dlq.page(filter, { limit, offset });
      return ctx.redact({ total, offset, limit, items: items.map(deadJobView) });
    },
  );

  api.get(
    '/queues/:queue/dlq/count',
    {
      schema: {
        summary: 'How many dead jobs match',
        params: queueParams,
        querystring: deadFilterQuery,
      },
    },
    async (request) => {
      const q = ctx.storesOf(request.params.queue);
      return { dead: await q.dlq.count(toFilter(request.query)) };
    },
  );

  api.get(
    '/queues/:queue/dlq/:id',
    { schema: { summary: 'One dead job with its attempt history', params: jobParams } },
    async (request) => {
      const q = ctx.storesOf(request.params.queue);
      const record = await q.dlq.get(request.params.id);
      if (!record)
        throw new HttpError(404, `no dead job "${request.params.id}" in ${q.name}'s DLQ`);
      return ctx.redact(deadJobView(record));
    },
  );

  for (const action of ['replay', 'purge'] as const) {
    api.post(
      `/queues/:queue/dlq/${action}`,
      {
        schema: {
          summary:
            action === 'replay'
              ? 'Move dead jobs back to the queue with fresh attempts, history kept'
              : 'Delete dead jobs for good',
          params: queueParams,
          body: deadBulkBody,
        },
      },
      async (request) => {
        const q = ctx.storesOf(request.params.queue);
        const { all: _all, ...rest } = request.body;
        const filter = toFilter(rest);
        if (filter.id !== undefined && !(await q.dlq.get(filter.id)))
          throw new HttpError(404, `no dead job "${filter.id}" in ${q.name}'s DLQ`);
        if (action === 'replay') return q.dlq.replay(filter);
        return { ...(await q.dlq.purge(filter)), renamed: [] };
      },
    );
  }
};
