import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { delayKind, type JobState } from '../../../src/policy/job-state.js';
import {
  isQueuePaused,
  listJobs,
  listedStates,
  type ListedJob,
} from '../../../src/scheduler/bullmq/bull-lists.js';
import { moveDelayedJob } from '../../../src/scheduler/bullmq/delayed-moves.js';
import { keyForJobId } from '../../../src/scheduler/job-id.js';
import { HttpError } from '../http.js';
import type { AdminPluginOptions } from './context.js';
import { jobParams, queueParams } from './schemas.js';

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

/**
 * The dashboard's job lists and the moves it offers beside them: paged
 * waiting/active/delayed/completed lists (`GET /queues/:queue/jobs`), a
 * delayed job run now or deleted (fenced by what the list read),
 * and pause/resume of a queue (BullMQ's pause, which every worker honours).
 * Reads only read; every view goes through the redaction module.
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
          parked: "is parked until its key has a free slot: it runs in its key's turn",
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
};

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
  };
}

function lastError(state: JobState | undefined, life: number): string | null {
  const last = state?.history.filter((h) => (h.replay ?? 0) === life).at(-1);
  return last?.error?.message ?? null;
}
