import { createLogger } from '../../src/config/logger.js';
import { parseBreakerOptions } from '../../src/policy/breaker/breaker-options.js';
import { parseBudgetOptions } from '../../src/policy/budget/budget-options.js';
import type { AttemptRecord } from '../../src/policy/job-state.js';
import type { RedisClient } from '../../src/redis/connection.js';
import { RequeueMetrics } from '../../src/scheduler/metrics.js';
import { createQueue, type RequeueQueue } from '../../src/scheduler/queue.js';
import { registerAdmin, type AdminAccess } from '../../workers/service/admin/index.js';
import { createIntakeServer, type IntakeServer } from '../../workers/service/http.js';
import type { seedDead } from '../harness/dlq.js';

/**
 * The admin API on a service's HTTP app, and a dead record to seed, shared by
 * the admin API's tests.
 */

const logger = createLogger({ level: 'silent' });
/** A response body, read freely by the assertions. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON under test, checked by expect()
export type Json = any;
export const token = 'admin-token-0123456789abcdef';
export const webhookSecret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

/** The admin API on a service's HTTP app, without workers: only what the test puts in Redis moves. */
export async function startAdmin(
  redis: RedisClient,
  names: { jobs: string; hooks: string },
  access: AdminAccess = { kind: 'token', token },
): Promise<{
  app: IntakeServer;
  url: string;
  queues: Map<string, RequeueQueue>;
  routes: string[];
}> {
  const queues = new Map<string, RequeueQueue>([
    [names.jobs, createQueue(names.jobs, { connection: redis })],
    [names.hooks, createQueue(names.hooks, { connection: redis })],
  ]);
  const app = await createIntakeServer({
    queues,
    ready: async () => true,
    metrics: new RequeueMetrics(),
    maxBodyBytes: 1 << 20,
    logger,
  });
  const routes: string[] = [];
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat())
      if (method !== 'HEAD') routes.push(`${method} ${route.url}`);
  });
  await registerAdmin(app, {
    queues: [
      {
        name: names.jobs,
        kind: 'handler',
        queue: queues.get(names.jobs)!,
        breaker: parseBreakerOptions({}),
        budget: parseBudgetOptions({ capacity: 50 }),
      },
      {
        name: names.hooks,
        kind: 'webhook',
        queue: queues.get(names.hooks)!,
        breaker: parseBreakerOptions({}),
        budget: undefined,
      },
    ],
    redis,
    access,
    host: access.kind === 'refused' ? '0.0.0.0' : '127.0.0.1',
    redactHeaders: [],
    logger,
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.address();
  const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  return { app, url, queues, routes };
}

export function deadRecord(
  source: string,
  id: string,
  extra: Partial<Parameters<typeof seedDead>[1]> = {},
) {
  const now = Date.now();
  const history: AttemptRecord[] = [
    {
      attempt: 1,
      startedAt: now - 3000,
      finishedAt: now - 2900,
      outcome: 'failed',
      error: { class: 'Error', message: 'service unavailable', status: 503 },
      decision: 'retry',
      delayMs: 1000,
      details: { status: 503, latencyMs: 100 },
    },
    {
      attempt: 2,
      startedAt: now - 1000,
      finishedAt: now - 950,
      outcome: 'failed',
      error: { class: 'Error', message: 'bad request', status: 400 },
      decision: 'dead-letter',
      deadReason: 'permanent-error',
      details: { status: 400, latencyMs: 50 },
    },
  ];
  return {
    source,
    id,
    name: 'deliver',
    data: {
      endpoint: {
        id: 'ep_1',
        url: 'https://u:pw@partner.example/h?token=abc',
        secret: webhookSecret,
      },
    },
    opts: {},
    reason: 'permanent-error' as const,
    message: 'bad request',
    attempts: 2,
    history,
    deadAt: now,
    firstFailedAt: now - 3000,
    replays: 0,
    ...extra,
  };
}
