import { createHash } from 'node:crypto';
import fastifySwagger from '@fastify/swagger';
import type { FastifyReply } from 'fastify';
import { jsonSchemaTransform, type FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { bearerMatches } from '../http.js';
import { breakersRoutes } from './breakers.js';
import { adminContext, type AdminApiOptions } from './context.js';
import { deliveriesRoutes } from './deliveries.js';
import { dlqRoutes } from './dlq.js';
import { endpointsRoutes } from './endpoints.js';
import { endpointRegistryRoutes } from './endpoint-registry.js';
import { activityRoutes } from './activity.js';
import { dlqSearchRoutes } from './dlq-search.js';
import { jobListsRoutes } from './job-lists.js';
import { endpointActionsRoutes } from './endpoint-actions.js';
import { retryNowRoutes } from './retry-now.js';
import { jobsRoutes } from './jobs.js';
import { queuesRoutes } from './queues.js';
import { scheduleRoutes } from './schedule.js';

export type { AdminApiOptions, AdminQueue } from './context.js';

/** One Fastify plugin per resource, registered in this order (the OpenAPI document's). */
const resources = [
  queuesRoutes,
  scheduleRoutes,
  jobsRoutes,
  jobListsRoutes,
  dlqSearchRoutes,
  activityRoutes,
  dlqRoutes,
  breakersRoutes,
  endpointsRoutes,
  endpointRegistryRoutes,
  endpointActionsRoutes,
  retryNowRoutes,
  deliveriesRoutes,
] as const;

/**
 * The admin API, mounted under `/admin`: queues and counts, the retry
 * schedule, jobs with their next attempt time, the DLQ (list, show, replay,
 * purge), breakers (status, open, close), the budget, webhook endpoints
 * (list, enable, disable), the delivery log, and `GET /admin/openapi.json`. Reads only read
 * (promise 3); replay and purge are the library's fenced moves; every view
 * goes through the redaction module. Errors take the service's shape: a 400
 * naming the field, a 404 for an unknown queue, job or endpoint. The bearer
 * hook and the OpenAPI plugin are added here, before the resources, so both
 * cover every resource's routes.
 */
export const adminApi: FastifyPluginAsyncZod<AdminApiOptions> = async (api, options) => {
  if (options.access.kind === 'token') {
    const expected = createHash('sha256').update(options.access.token).digest();
    api.addHook('onRequest', async (request, reply: FastifyReply) => {
      if (bearerMatches(request.headers.authorization, expected)) return;
      await reply
        .code(401)
        .header('www-authenticate', 'Bearer')
        .send({ error: 'missing or wrong bearer token' });
    });
  }

  await api.register(fastifySwagger, {
    openapi: {
      info: {
        title: 'requeue admin API',
        description:
          'Queues, the retry schedule, the dead-letter queue, breakers, the budget and webhook endpoints.',
        version: '1',
      },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      security: options.access.kind === 'token' ? [{ bearer: [] }] : [],
    },
    transform: jsonSchemaTransform,
  });
  api.get('/openapi.json', { schema: { hide: true } }, async () => api.swagger());

  const ctx = adminContext(options);
  for (const resource of resources) await api.register(resource, { ctx });
};
