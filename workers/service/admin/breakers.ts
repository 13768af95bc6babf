import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { breakerStatusView } from '../../../src/redis/breaker-store.js';
import { queueBreakerKey } from '../../../src/scheduler/requeue-worker.js';
import type { AdminPluginOptions } from './context.js';
import { breakerCloseBody, breakerKeyBody, limitsQuery, queueParams } from './schemas.js';

/** Breakers (status, open, close), pauses, adaptive limits and the retry budget of a queue. */
export const breakersRoutes: FastifyPluginAsyncZod<AdminPluginOptions> = async (api, { ctx }) => {
  api.get(
    '/queues/:queue/breakers',
    {
      schema: {
        summary: 'Each breaker key: state, failure rate, when it half-opens',
        params: queueParams,
      },
    },
    async (request) => {
      const q = ctx.storesOf(request.params.queue);
      const keys = await q.breakers.knownKeys();
      const statuses = await Promise.all(
        (keys.length > 0 ? keys : [queueBreakerKey]).map((key) => q.breakers.status(key)),
      );
      const now = ctx.clock.now();
      const paused = (await q.pauses.list())
        .filter((p) => p.until > now)
        .map((p) => ({ key: p.key, until: p.until }));
      return ctx.redact({
        queue: q.name,
        enabled: q.breaker !== undefined,
        breakers: statuses.map(breakerStatusView),
        budget: q.budgetStore ? await q.budgetStore.status() : null,
        paused,
      });
    },
  );

  api.post(
    '/queues/:queue/breakers/open',
    {
      schema: {
        summary: 'Force a circuit open (isolated) until closed by hand',
        params: queueParams,
        body: breakerKeyBody,
      },
    },
    async (request) => {
      const q = ctx.storesOf(request.params.queue);
      const key = request.body.key ?? queueBreakerKey;
      await q.breakers.forceOpen(key, ctx.clock.now());
      return breakerStatusView(await q.breakers.status(key));
    },
  );

  api.post(
    '/queues/:queue/breakers/close',
    {
      schema: {
        summary: 'Force a circuit closed and clear its window',
        params: queueParams,
        body: breakerCloseBody,
      },
    },
    async (request) => {
      const q = ctx.storesOf(request.params.queue);
      const key = request.body.key ?? queueBreakerKey;
      await q.breakers.forceClose(key);
      if (request.body.resetBudget) await q.budgetStore?.reset();
      return breakerStatusView(await q.breakers.status(key));
    },
  );

  api.get(
    '/queues/:queue/limits',
    {
      schema: {
        summary:
          "Adaptive concurrency: each key's learned limit and attempts in flight across the fleet",
        params: queueParams,
        querystring: limitsQuery,
      },
    },
    async (request) => {
      const q = ctx.storesOf(request.params.queue);
      const [keys, views] = await Promise.all([q.limits.count(), q.limits.list(request.query.max)]);
      return ctx.redact({
        queue: q.name,
        keys,
        limits: views.map((v) => ({
          ...v,
          admits: v.limit === null ? null : Math.floor(v.limit),
        })),
      });
    },
  );

  api.get(
    '/queues/:queue/budget',
    { schema: { summary: "The queue's retry budget as it stands", params: queueParams } },
    async (request) => {
      const q = ctx.storesOf(request.params.queue);
      return { queue: q.name, budget: q.budgetStore ? await q.budgetStore.status() : null };
    },
  );
};
