import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { delayKind } from '../../../src/policy/job-state.js';
import { keyForJobId, lookupIds } from '../../../src/scheduler/job-id.js';
import { readLiveJob, type LiveJob } from '../../../src/scheduler/bullmq/bull-reads.js';
import { HttpError } from '../http.js';
import { deadJobView, type AdminPluginOptions } from './context.js';
import { jobParams } from './schemas.js';

/** `GET /queues/:queue/jobs/:id`: one job, live or dead, with its next attempt time. */
export const jobsRoutes: FastifyPluginAsyncZod<AdminPluginOptions> = async (api, { ctx }) => {
  api.get(
    '/queues/:queue/jobs/:id',
    {
      schema: {
        summary: 'One job (live or dead): where it is, its next attempt time, its history',
        params: jobParams,
      },
    },
    async (request) => {
      const q = ctx.storesOf(request.params.queue);
      const id = request.params.id;
      // By key first, then as an id; readLiveJob takes only a job's hash, never a BullMQ key.
      for (const candidate of lookupIds(id)) {
        const live = await readLiveJob(ctx.options.redis, q.name, candidate, q.prefix);
        if (live) return ctx.redact(liveJobView(q.name, live));
      }
      const dead = await q.dlq.get(id);
      if (dead) return ctx.redact(deadJobView(dead));
      throw new HttpError(404, `no job "${id}" in ${q.name} or its DLQ`);
    },
  );
};

function liveJobView(queue: string, job: LiveJob) {
  return {
    queue,
    id: job.id,
    key: keyForJobId(job.id) ?? null,
    name: job.name,
    where: job.where,
    nextAttemptAt: job.where === 'delayed' ? (job.dueAt ?? null) : null,
    delayKind: job.where === 'delayed' ? delayKind(job.state, job.life) : null,
    addedAt: job.addedAt ?? null,
    attemptsStarted: job.attemptsStarted,
    replays: job.life,
    progress: job.progress ?? null,
    /** BullMQ's last stack for the job, when it kept one (redacted with the rest of the view). */
    stack: job.stack ?? null,
    opts: job.opts,
    fence: job.score === undefined ? null : { score: job.score, attemptsMade: job.attemptsMade },
    data: job.data,
    history: job.state?.history ?? [],
  };
}
