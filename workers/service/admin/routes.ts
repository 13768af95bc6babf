import { createHash } from 'node:crypto';
import fastifySwagger from '@fastify/swagger';
import type { FastifyReply } from 'fastify';
import { jsonSchemaTransform, type FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { Logger } from '../../../src/config/logger.js';
import {
  parseBreakerOptions,
  type BreakerOptions,
} from '../../../src/policy/breaker/breaker-options.js';
import type { BudgetOptions } from '../../../src/policy/budget/budget-options.js';
import { delayKind, type JobState } from '../../../src/policy/job-state.js';
import { BreakerStore, breakerStatusView } from '../../../src/redis/breaker-store.js';
import type { RedisClient } from '../../../src/redis/connection.js';
import { BudgetStore } from '../../../src/redis/budget-store.js';
import { EndpointStore } from '../../../src/redis/endpoint-store.js';
import { PauseStore } from '../../../src/redis/pause-store.js';
import {
  DeadLetterQueue,
  type DeadJobFilter,
  type DeadJobRecord,
} from '../../../src/scheduler/dead-letter.js';
import { lookupIds } from '../../../src/scheduler/job-id.js';
import {
  countDelayedDue,
  nextDelayed,
  readLiveJob,
  type LiveJob,
} from '../../../src/scheduler/job-moves.js';
import type { RequeueQueue } from '../../../src/scheduler/queue.js';
import { queueBreakerKey } from '../../../src/scheduler/worker.js';
import { defaultSecretHeaders, redactValue } from '../../../src/util/redact.js';
import { systemClock, type Clock } from '../../../src/util/system.js';
import { bearerMatches, HttpError } from '../http.js';
import type { AdminAccess } from './access.js';
import {
  breakerCloseBody,
  breakerKeyBody,
  deadBulkBody,
  deadFilterQuery,
  deadListQuery,
  endpointDisableBody,
  endpointParams,
  jobParams,
  parseTime,
  queueParams,
  scheduleQuery,
} from './schemas.js';

/** A queue the service runs, as the admin API sees it. */
export interface AdminQueue {
  name: string;
  /** `webhook`: the delivery queue, whose breaker keys are endpoint ids. */
  kind: 'webhook' | 'handler';
  queue: RequeueQueue;
  /** The workers' breaker options; undefined when the queue has no breaker. */
  breaker: BreakerOptions | undefined;
  /** The workers' budget options; undefined when the queue has no budget. */
  budget: BudgetOptions | undefined;
}

export interface AdminApiOptions {
  queues: readonly AdminQueue[];
  redis: RedisClient;
  access: Exclude<AdminAccess, { kind: 'refused' }>;
  /** Headers whose values views never show, besides the defaults. */
  redactHeaders: readonly string[];
  logger: Logger;
  clock?: Clock;
}

/** The stores of one queue, made once. */
interface QueueStores extends AdminQueue {
  dlq: DeadLetterQueue;
  breakers: BreakerStore;
  budgetStore: BudgetStore | undefined;
  pauses: PauseStore;
  /** BullMQ's key prefix of the queue (with its hash tag on a cluster). */
  prefix: string;
}

const minuteMs = 60_000;
const hourMs = 3_600_000;
const dayMs = 86_400_000;
/** The timeline's bins per horizon: [span, bin width]. */
const horizons = {
  minute: [minuteMs, 1_000],
  hour: [hourMs, minuteMs],
  day: [dayMs, 15 * minuteMs],
} as const;

/**
 * The admin API, mounted under `/admin`: queues and counts, the retry
 * schedule, jobs with their next attempt time, the DLQ (list, show, replay,
 * purge), breakers (status, open, close), the budget, webhook endpoints
 * (list, enable, disable), and `GET /admin/openapi.json`. Reads only read
 * (promise 3); replay and purge are the library's fenced moves; every view
 * goes through the redaction module. Errors take the service's shape: a 400
 * naming the field, a 404 for an unknown queue, job or endpoint.
 */
export const adminApi: FastifyPluginAsyncZod<AdminApiOptions> = async (api, options) => {
  const clock = options.clock ?? systemClock;
  const redact = (value: unknown) =>
    redactValue(value, { headers: [...defaultSecretHeaders, ...options.redactHeaders] });
  const endpoints = new EndpointStore({ connection: options.redis, cacheTtlMs: 0 });
  const stores = new Map<string, QueueStores>(
    options.queues.map((q) => [
      q.name,
      {
        ...q,
        dlq: new DeadLetterQueue(q.name, { connection: options.redis, logger: options.logger }),
        breakers: new BreakerStore(options.redis, q.name, q.breaker ?? parseBreakerOptions({})),
        budgetStore: q.budget ? new BudgetStore(options.redis, q.name, q.budget) : undefined,
        pauses: new PauseStore(options.redis, q.name),
        prefix: q.queue.bull.opts.prefix ?? 'bull',
      },
    ]),
  );
  const storesOf = (name: string): QueueStores => {
    const found = stores.get(name);
    if (!found) throw new HttpError(404, `no queue "${name}" here`, { queues: [...stores.keys()] });
    return found;
  };

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

  api.get('/queues', { schema: { summary: 'Every queue with its counts' } }, async () => ({
    queues: await Promise.all(
      [...stores.values()].map(async (q) => ({
        name: q.name,
        kind: q.kind,
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
      const q = storesOf(request.params.queue);
      return { name: q.name, kind: q.kind, counts: await q.queue.counts() };
    },
  );

  api.get(
    '/queues/:queue/schedule',
    {
      schema: {
        summary:
          'Upcoming retries: counts due within the next minute, hour and day, a timeline, the soonest jobs',
        params: queueParams,
        querystring: scheduleQuery,
      },
    },
    async (request) => {
      const q = storesOf(request.params.queue);
      const now = clock.now();
      const [span, binMs] = horizons[request.query.horizon];
      const bins = span / binMs;
      const ranges: [number, number][] = [
        [-Infinity, now],
        [now, now + minuteMs],
        [now, now + hourMs],
        [now, now + dayMs],
        [now + dayMs, Infinity],
      ];
      for (let i = 0; i < bins; i += 1) ranges.push([now + i * binMs, now + (i + 1) * binMs]);
      const [counts, upcoming] = await Promise.all([
        countDelayedDue(options.redis, q.name, ranges, q.prefix),
        request.query.limit > 0
          ? nextDelayed(options.redis, q.name, request.query.limit, q.prefix)
          : Promise.resolve([]),
      ]);
      const [overdue, minute, hour, day, later] = counts;
      return {
        queue: q.name,
        now,
        due: { overdue, withinMinute: minute, withinHour: hour, withinDay: day, later },
        timeline: { from: now, binMs, counts: counts.slice(5) },
        upcoming: upcoming.map((j) => ({
          id: j.id,
          name: j.name,
          dueAt: j.dueAt,
          kind: delayKind(j.state, j.life),
          ...lastAttempt(j.state, j.life),
        })),
      };
    },
  );

  api.get(
    '/queues/:queue/jobs/:id',
    {
      schema: {
        summary: 'One job (live or dead): where it is, its next attempt time, its history',
        params: jobParams,
      },
    },
    async (request) => {
      const q = storesOf(request.params.queue);
      const id = request.params.id;
      // By key first, then as an id; readLiveJob takes only a job's hash, never a BullMQ key.
      for (const candidate of lookupIds(id)) {
        const live = await readLiveJob(options.redis, q.name, candidate, q.prefix);
        if (live) return redact(liveJobView(q.name, live));
      }
      const dead = await q.dlq.get(id);
      if (dead) return redact(deadJobView(dead));
      throw new HttpError(404, `no job "${id}" in ${q.name} or its DLQ`);
    },
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
      const q = storesOf(request.params.queue);
      const { limit, offset, ...rest } = request.query;
      const filter = toFilter(rest);
      const { items, total } = await q.dlq.page(filter, { limit, offset });
      return redact({ total, offset, limit, items: items.map(deadJobView) });
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
      const q = storesOf(request.params.queue);
      return { dead: await q.dlq.count(toFilter(request.query)) };
    },
  );

  api.get(
    '/queues/:queue/dlq/:id',
    { schema: { summary: 'One dead job with its attempt history', params: jobParams } },
    async (request) => {
      const q = storesOf(request.params.queue);
      const record = await q.dlq.get(request.params.id);
      if (!record)
        throw new HttpError(404, `no dead job "${request.params.id}" in ${q.name}'s DLQ`);
      return redact(deadJobView(record));
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
        const q = storesOf(request.params.queue);
        const { all: _all, ...rest } = request.body;
        const filter = toFilter(rest);
        if (filter.id !== undefined && !(await q.dlq.get(filter.id)))
          throw new HttpError(404, `no dead job "${filter.id}" in ${q.name}'s DLQ`);
        if (action === 'replay') return q.dlq.replay(filter);
        return { ...(await q.dlq.purge(filter)), renamed: [] };
      },
    );
  }

  api.get(
    '/queues/:queue/breakers',
    {
      schema: {
        summary: 'Each breaker key: state, failure rate, when it half-opens',
        params: queueParams,
      },
    },
    async (request) => {
      const q = storesOf(request.params.queue);
      const keys = await q.breakers.knownKeys();
      const statuses = await Promise.all(
        (keys.length > 0 ? keys : [queueBreakerKey]).map((key) => q.breakers.status(key)),
      );
      const now = clock.now();
      const paused = (await q.pauses.list())
        .filter((p) => p.until > now)
        .map((p) => ({ key: p.key, until: p.until }));
      return redact({
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
      const q = storesOf(request.params.queue);
      const key = request.body.key ?? queueBreakerKey;
      await q.breakers.forceOpen(key, clock.now());
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
      const q = storesOf(request.params.queue);
      const key = request.body.key ?? queueBreakerKey;
      await q.breakers.forceClose(key);
      if (request.body.resetBudget) await q.budgetStore?.reset();
      return breakerStatusView(await q.breakers.status(key));
    },
  );

  api.get(
    '/queues/:queue/budget',
    { schema: { summary: "The queue's retry budget as it stands", params: queueParams } },
    async (request) => {
      const q = storesOf(request.params.queue);
      return { queue: q.name, budget: q.budgetStore ? await q.budgetStore.status() : null };
    },
  );

  api.get(
    '/queues/:queue/endpoints',
    {
      schema: {
        summary: 'Webhook endpoints seen by the breaker or disabled, with their state',
        params: queueParams,
      },
    },
    async (request) => {
      const q = storesOf(request.params.queue);
      return redact({ queue: q.name, endpoints: await endpointViews(q) });
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
      const q = storesOf(request.params.queue);
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
      const q = storesOf(request.params.queue);
      const id = request.params.endpointId;
      const changed = await endpoints.enable(q.name, id);
      if (!changed && !(await q.breakers.knownKeys()).includes(id))
        throw new HttpError(404, `no endpoint "${id}" known in ${q.name}`);
      return { endpointId: id, disabled: false, changed };
    },
  );

  /** Disabled endpoints and the keys the breaker has seen (endpoint ids), one row each. */
  async function endpointViews(q: QueueStores) {
    const [disabled, keys] = await Promise.all([
      endpoints.list(q.name),
      q.kind === 'webhook' ? q.breakers.knownKeys() : Promise.resolve([]),
    ]);
    const byId = new Map(disabled.map((d) => [d.endpointId, d]));
    const ids = [...new Set([...byId.keys(), ...keys.filter((k) => k !== queueBreakerKey)])].sort();
    return Promise.all(
      ids.map(async (endpointId) => {
        const entry = byId.get(endpointId);
        const breaker = keys.includes(endpointId)
          ? breakerStatusView(await q.breakers.status(endpointId))
          : null;
        return {
          endpointId,
          disabled: entry !== undefined,
          reason: entry?.reason ?? null,
          disabledAt: entry?.disabledAt ?? null,
          breaker,
        };
      }),
    );
  }
};

function toFilter(query: {
  id?: string | undefined;
  reason?: DeadJobFilter['reason'] | undefined;
  name?: string | undefined;
  since?: string | undefined;
  until?: string | undefined;
}): DeadJobFilter {
  const filter: DeadJobFilter = {};
  if (query.id !== undefined) filter.id = query.id;
  if (query.reason !== undefined) filter.reason = query.reason;
  if (query.name !== undefined) filter.name = query.name;
  if (query.since !== undefined) filter.since = parseTime(query.since);
  if (query.until !== undefined) filter.until = parseTime(query.until);
  return filter;
}

/** The last attempt of this life, for the schedule's list. */
function lastAttempt(state: JobState | undefined, life: number) {
  const last = state?.history.filter((h) => (h.replay ?? 0) === life).at(-1);
  if (!last) return { attempt: null, lastError: null };
  return { attempt: last.attempt, lastError: last.error?.message ?? null };
}

function liveJobView(queue: string, job: LiveJob) {
  return {
    queue,
    id: job.id,
    name: job.name,
    where: job.where,
    nextAttemptAt: job.where === 'delayed' ? (job.dueAt ?? null) : null,
    delayKind: job.where === 'delayed' ? delayKind(job.state, job.life) : null,
    addedAt: job.addedAt ?? null,
    attemptsStarted: job.attemptsStarted,
    replays: job.life,
    data: job.data,
    history: job.state?.history ?? [],
  };
}

function deadJobView(r: DeadJobRecord) {
  return {
    queue: r.source,
    id: r.id,
    gen: r.gen,
    name: r.name,
    where: 'dead' as const,
    nextAttemptAt: null,
    reason: r.reason,
    message: r.message,
    attempts: r.attempts,
    replays: r.replays,
    idempotencyKey: r.idempotencyKey ?? null,
    firstFailedAt: r.firstFailedAt ?? null,
    deadAt: r.deadAt,
    data: r.data,
    history: r.history,
  };
}
