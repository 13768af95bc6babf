import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { delayKind, type JobState } from '../../../src/policy/job-state.js';
import { readActivity } from '../../../src/scheduler/bullmq/bull-activity.js';
import {
  isQueuePaused,
  listJobs,
  listedStates,
  type ListedJob,
} from '../../../src/scheduler/bullmq/bull-lists.js';
import { moveDelayedJob } from '../../../src/scheduler/bullmq/delayed-moves.js';
import { keyForJobId } from '../../../src/scheduler/job-id.js';
import { HttpError } from '../http.js';
import { deadJobView, type AdminPluginOptions } from './context.js';
import { jobParams, queueParams } from './schemas.js';

/** Dead records a search reads at most, newest first (a search is a scan: bounded). */
const searchScan = 5_000;
const searchChunk = 500;

const listQuery = z.strictObject({
  state: z.enum(listedStates).default('waiting'),
  limit: z.coerce.number().int().min(1).max(200).default(25),
  offset: z.coerce.number().int().min(0).max(100_000_000).default(0),
});

/** The fence of a delayed job as the list or the job view gave it. */
const fenceBody = z.strictObject({
  score: z.string().regex(/^\d{1,17}$/, 'expected the score the list gave'),
  attemptsMade: z.number().int().min(0),
});

const searchQuery = z.strictObject({
  q: z.string().trim().min(1).max(200),
  limit: z.coerce.number().int().min(1).max(200).default(20),
  offset: z.coerce.number().int().min(0).max(searchScan).default(0),
});

const activityQuery = z.strictObject({
  minutes: z.coerce
    .number()
    .int()
    .min(5)
    .max(24 * 60)
    .default(60),
});

/**
 * The dashboard's job lists and the moves it offers beside them: paged
 * waiting/active/delayed/completed lists (`GET /queues/:queue/jobs`), a
 * delayed job run now or deleted (fenced by what the list read),
 * pause/resume of a queue (BullMQ's pause, which every worker honours), a
 * text search of the DLQ, and the per-minute activity graph. Reads only
 * read; every view goes through the redaction module.
 */
export const jobListsRoutes: FastifyPluginAsyncZod<AdminPluginOptions> = async (api, { ctx }) => {
  const { redis } = ctx.options;

  api.get(
    '/queues/:queue/jobs',
    {
      schema: {
        summary: 'Waiting, active, delayed or completed jobs, paged, with the set’s total',
        params: queueParams,
        querystring: listQuery,
      },
    },
    async (request) => {
      const q = ctx.storesOf(request.params.queue);
      const { state, limit, offset } = request.query;
      const [page, paused] = await Promise.all([
        listJobs(redis, q.name, state, { offset, limit }, q.prefix),
        isQueuePaused(redis, q.name, q.prefix),
      ]);
      return ctx.redact({
        queue: q.name,
        state,
        paused,
        total: page.total,
        offset,
        limit,
        items: page.items.map((job) => listedView(state, job)),
      });
    },
  );

  for (const [action, verb] of [
    ['promote', 'retry-now'],
    ['remove', 'delete'],
  ] as const) {
    api.post(
      `/queues/:queue/delayed/:id/${verb}`,
      {
        schema: {
          summary:
            action === 'promote'
              ? 'Run a delayed job now, if it is still as read'
              : 'Delete a delayed job, if it is still as read',
          params: jobParams,
          body: fenceBody,
        },
      },
      async (request) => {
        const q = ctx.storesOf(request.params.queue);
        const { id } = request.params;
        const result = await moveDelayedJob(redis, q.name, action, id, request.body, q.prefix);
        if (result.kind === 'done') return { id, done: verb };
        const why = {
          gone: 'is not delayed any more',
          changed: 'was rescheduled or retried since it was read',
          'has-parent': 'is a flow child: delete its parent instead',
        }[result.kind];
        throw new HttpError(409, `job "${id}" ${why}; nothing was changed`, {
          result: result.kind,
        });
      },
    );
  }

  for (const verb of ['pause', 'resume'] as const) {
    api.post(
      `/queues/:queue/${verb}`,
      {
        schema: {
          summary:
            verb === 'pause'
              ? 'Pause the queue: workers fetch nothing new until resumed'
              : 'Resume a paused queue',
          params: queueParams,
        },
      },
      async (request) => {
        const q = ctx.storesOf(request.params.queue);
        await (verb === 'pause' ? q.queue.pause() : q.queue.resume());
        return { queue: q.name, paused: await isQueuePaused(redis, q.name, q.prefix) };
      },
    );
  }

  api.get(
    '/queues/:queue/dlq-search',
    {
      schema: {
        summary: `Dead jobs whose error messages or payload contain a text (the newest ${searchScan} searched)`,
        params: queueParams,
        querystring: searchQuery,
      },
    },
    async (request) => {
      const q = ctx.storesOf(request.params.queue);
      const { limit, offset } = request.query;
      const needle = request.query.q.toLowerCase();
      const matches: unknown[] = [];
      let scanned = 0;
      let complete = false;
      while (scanned < searchScan) {
        const records = await q.dlq.list({}, { offset: scanned, limit: searchChunk });
        scanned += records.length;
        // Matched on the redacted view: a search never reveals what the view hides.
        for (const view of records.map((r) => ctx.redact(deadJobView(r)))) {
          if (searchable(view).includes(needle)) matches.push(view);
        }
        if (records.length < searchChunk) {
          complete = true;
          break;
        }
      }
      return {
        queue: q.name,
        q: request.query.q,
        total: matches.length,
        scanned,
        complete,
        offset,
        limit,
        items: matches.slice(offset, offset + limit),
      };
    },
  );

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

/** The text a search looks in: the error messages, the reason and the payload. */
function searchable(view: unknown): string {
  const v = view as { message?: unknown; data?: unknown; history?: unknown };
  return JSON.stringify([v.message, v.data, v.history]).toLowerCase();
}

/** One job of a list as the dashboard shows it (redacted by the caller). */
function listedView(state: string, job: ListedJob) {
  return {
    id: job.id,
    key: keyForJobId(job.id) ?? null,
    name: job.name,
    where: state,
    addedAt: job.addedAt ?? null,
    dueAt: job.dueAt ?? null,
    kind: state === 'delayed' ? delayKind(job.state, job.life) : null,
    attemptsStarted: job.attemptsStarted,
    processedAt: job.processedAt ?? null,
    finishedAt: job.finishedAt ?? null,
    lastError: lastError(job.state, job.life),
    fence: job.score === undefined ? null : { score: job.score, attemptsMade: job.attemptsMade },
    data: job.data,
  };
}

function lastError(state: JobState | undefined, life: number): string | null {
  const last = state?.history.filter((h) => (h.replay ?? 0) === life).at(-1);
  return last?.error?.message ?? null;
}
