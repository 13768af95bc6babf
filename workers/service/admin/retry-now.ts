import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { retryJobNow } from '../../../src/scheduler/retry-now.js';
import { HttpError } from '../http.js';
import type { AdminPluginOptions } from './context.js';
import { jobParams } from './schemas.js';

const retryNowBody = z
  .strictObject({
    attemptsStarted: z
      .number()
      .int()
      .min(0)
      .max(1_000_000)
      .optional()
      .describe('the attempts started the caller saw; the move happens only while they are so'),
  })
  .prefault({});

/**
 * `POST /queues/:queue/deliveries/:id/retry-now` (issue 24, item 5): a
 * scheduled retry due now, in one step fenced by the attempts started the
 * caller saw (then `moveDelayed-8.lua`, fenced by what was read); 409 naming why when it has moved on.
 */
export const retryNowRoutes: FastifyPluginAsyncZod<AdminPluginOptions> = async (api, { ctx }) => {
  api.post(
    '/queues/:queue/deliveries/:id/retry-now',
    {
      schema: {
        summary: 'Run a scheduled retry now, only while it is still that retry at that attempt',
        params: jobParams,
        body: retryNowBody,
      },
    },
    async (request) => {
      const q = ctx.storesOf(request.params.queue);
      const outcome = await retryJobNow(ctx.options.redis, q.name, request.params.id, {
        prefix: q.prefix,
        ...(request.body.attemptsStarted !== undefined
          ? { attemptsStarted: request.body.attemptsStarted }
          : {}),
      });
      if (outcome.result === 'not-found')
        throw new HttpError(404, `no job "${request.params.id}" in ${q.name}`);
      if (outcome.result !== 'moved')
        throw new HttpError(409, `job ${outcome.id} was not moved: ${outcome.result}`, {
          result: outcome.result,
        });
      return outcome;
    },
  );
};
