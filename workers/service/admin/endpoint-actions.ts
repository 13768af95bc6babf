import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { isResendError } from '../../../src/errors/resend-error.js';
import { recoverEndpoint, resendMessage } from '../../webhook/recovery.js';
import { HttpError } from '../http.js';
import type { AdminPluginOptions, QueueStores } from './context.js';
import { endpointParams, parseTime, time } from './schemas.js';

const resendBody = z.strictObject({
  message: z.string().min(1).max(256).describe('the message (event) id'),
});

const recoverBody = z
  .strictObject({
    since: time,
    until: time.optional(),
    dryRun: z.boolean().default(false),
    ratePerSec: z.number().min(0.001).max(100_000).optional(),
  })
  .refine((b) => b.until === undefined || parseTime(b.until) > parseTime(b.since), {
    message: 'must be after since',
    path: ['until'],
  });

/** A recovery running in this process: its progress, polled by the dashboard. */
interface Running {
  done: number;
  total: number;
  finished: boolean;
  error: string | null;
}

/**
 * Resend and recover (issue 24, item 5), the library's fenced moves:
 * `POST …/endpoints/:id/resend` adds a resend of a delivered message;
 * `POST …/endpoints/:id/recover` counts (`dryRun`) or starts bringing back
 * the endpoint's dead deliveries in its own lane, rate-limited, and answers
 * at once (202; `GET` the same path for its progress). A recovery still
 * running when the service closes stops after its batch (a rerun finishes
 * it). Retry-now is `retry-now.ts`.
 */
export const endpointActionsRoutes: FastifyPluginAsyncZod<AdminPluginOptions> = async (
  api,
  { ctx },
) => {
  const running = new Map<string, Running>();
  const abort = new AbortController();
  const inFlight = new Set<Promise<unknown>>();
  api.addHook('onClose', async () => {
    abort.abort();
    await Promise.allSettled([...inFlight]);
  });

  const webhookQueue = (name: string): QueueStores => {
    const q = ctx.storesOf(name);
    if (q.kind !== 'webhook') throw new HttpError(404, `${q.name} is not a webhook queue`);
    return q;
  };

  api.post(
    '/queues/:queue/endpoints/:endpointId/resend',
    {
      schema: {
        summary: 'Send a delivered message to this endpoint again, as a delivery of its own',
        params: endpointParams,
        body: resendBody,
      },
    },
    async (request, reply) => {
      const q = webhookQueue(request.params.queue);
      try {
        const resent = await resendMessage(
          q.queue,
          request.params.endpointId,
          request.body.message,
          { redis: ctx.options.redis, clock: ctx.clock },
        );
        return await reply.code(202).send(resent);
      } catch (err) {
        if (isResendError(err))
          throw new HttpError(err.code === 'not-found' ? 404 : 409, err.message);
        throw err;
      }
    },
  );

  api.post(
    '/queues/:queue/endpoints/:endpointId/recover',
    {
      schema: {
        summary:
          "Count (dryRun) or bring back the endpoint's dead deliveries since a time, in their own lane",
        params: endpointParams,
        body: recoverBody,
      },
    },
    async (request, reply) => {
      const q = webhookQueue(request.params.queue);
      const endpointId = request.params.endpointId;
      const { since, until, dryRun, ratePerSec } = request.body;
      const window = {
        since: parseTime(since),
        ...(until !== undefined ? { until: parseTime(until) } : {}),
      };
      if (dryRun) return recoverEndpoint(q.dlq, endpointId, { ...window, dryRun: true });
      const key = `${q.name}\n${endpointId}`;
      if (running.get(key)?.finished === false)
        throw new HttpError(409, `a recovery of ${endpointId} is already running`);
      const state: Running = { done: 0, total: 0, finished: false, error: null };
      running.set(key, state);
      const run = recoverEndpoint(q.dlq, endpointId, {
        ...window,
        ...(ratePerSec !== undefined ? { ratePerSec } : {}),
        signal: abort.signal,
        onProgress: (p) => Object.assign(state, p),
      }).then(
        () => {
          state.finished = true;
        },
        (err: unknown) => {
          state.finished = true;
          state.error = (err as Error).message;
          ctx.options.logger.warn({ err, endpointId }, 'a recovery stopped');
        },
      );
      inFlight.add(run);
      void run.finally(() => inFlight.delete(run));
      return reply.code(202).send({ endpointId, started: true });
    },
  );

  api.get(
    '/queues/:queue/endpoints/:endpointId/recover',
    {
      schema: {
        summary: 'The progress of the last recovery of this endpoint started by this process',
        params: endpointParams,
      },
    },
    async (request) => {
      const q = webhookQueue(request.params.queue);
      const state = running.get(`${q.name}\n${request.params.endpointId}`);
      if (!state) throw new HttpError(404, `no recovery of ${request.params.endpointId} here`);
      return { endpointId: request.params.endpointId, ...state };
    },
  );
};
