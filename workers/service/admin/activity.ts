import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { readActivity } from '../../../src/scheduler/bullmq/bull-activity.js';
import type { AdminPluginOptions } from './context.js';
import { queueParams } from './schemas.js';

const activityQuery = z.strictObject({
  minutes: z.coerce
    .number()
    .int()
    .min(5)
    .max(24 * 60)
    .default(60),
});

/**
 * `GET /queues/:queue/activity`: completions, retries and deaths per minute
 * for the dashboard's graph, from BullMQ's event stream. Reads only.
 */
export const activityRoutes: FastifyPluginAsyncZod<AdminPluginOptions> = async (api, { ctx }) => {
  const { redis } = ctx.options;
  api.get(
    '/queues/:queue/activity',
    {
      schema: {
        summary: 'Completions, retries and deaths per minute, from BullMQ’s event stream',
        params: queueParams,
        querystring: activityQuery,
      },
    },
    async (request) => {
      const q = ctx.storesOf(request.params.queue);
      const binMs = 60_000;
      const bins = request.query.minutes;
      const now = ctx.clock.now();
      const from = (Math.floor(now / binMs) - bins + 1) * binMs;
      const activity = await readActivity(redis, q.name, from, binMs, bins, q.prefix);
      return { queue: q.name, ...activity, oldestAt: activity.oldestAt ?? null };
    },
  );
};
