import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { delayKind, type JobState } from '../../../src/policy/job-state.js';
import { delayedDueAt } from '../../../src/scheduler/bullmq/bull-keys.js';
import {
  countDelayedDue,
  nextDelayed,
  readDelayed,
  scanDelayed,
} from '../../../src/scheduler/bullmq/bull-reads.js';
import type { RedisClient } from '../../../src/redis/connection.js';
import { keyForJobId } from '../../../src/scheduler/job-id.js';
import type { AdminPluginOptions } from './context.js';
import { queueParams, scheduleQuery } from './schemas.js';

const minuteMs = 60_000;
const hourMs = 3_600_000;
const dayMs = 86_400_000;
/** The timeline's bins per horizon: [span, bin width]. */
const horizons = {
  minute: [minuteMs, 1_000],
  hour: [hourMs, minuteMs],
  day: [dayMs, 15 * minuteMs],
} as const;

/** `GET /queues/:queue/schedule`: the upcoming retries, counted, binned and listed. */
export const scheduleRoutes: FastifyPluginAsyncZod<AdminPluginOptions> = async (api, { ctx }) => {
  const { redis } = ctx.options;
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
      const q = ctx.storesOf(request.params.queue);
      const now = ctx.clock.now();
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
      const { counts, upcoming, retriesOnly } =
        request.query.only === 'retries'
          ? await retriesDue(redis, q.name, ranges, request.query.limit, q.prefix)
          : {
              counts: await countDelayedDue(redis, q.name, ranges, q.prefix),
              upcoming:
                request.query.limit > 0
                  ? await nextDelayed(redis, q.name, request.query.limit, q.prefix)
                  : [],
              retriesOnly: undefined,
            };
      const [overdue, minute, hour, day, later] = counts;
      return {
        queue: q.name,
        now,
        due: { overdue, withinMinute: minute, withinHour: hour, withinDay: day, later },
        timeline: { from: now, binMs, counts: counts.slice(5) },
        ...(retriesOnly ?? {}),
        upcoming: upcoming.map((j) => ({
          id: j.id,
          ...(retriesOnly ? { key: keyForJobId(j.id) ?? null } : {}),
          name: j.name,
          dueAt: j.dueAt,
          kind: delayKind(j.state, j.life),
          ...lastAttempt(j.state, j.life),
        })),
      };
    },
  );
};

/** The last attempt of this life, for the schedule's list. */
function lastAttempt(state: JobState | undefined, life: number) {
  const last = state?.history.filter((h) => (h.replay ?? 0) === life).at(-1);
  if (!last) return { attempt: null, lastError: null };
  return { attempt: last.attempt, lastError: last.error?.message ?? null };
}

/** Delayed jobs a retries-only schedule classifies at most (the soonest). */
const retryScanCap = 10_000;

/**
 * The schedule of retries only: the soonest {@link retryScanCap} delayed jobs
 * read with their attempts made, those that ran (a retry or a deferral)
 * counted per range and listed; jobs added with a delay are counted apart.
 */
async function retriesDue(
  redis: RedisClient,
  queue: string,
  ranges: readonly [number, number][],
  limit: number,
  prefix: string,
) {
  const scan = await scanDelayed(redis, queue, retryScanCap, prefix);
  const retries = scan.entries.filter(([, , made]) => made >= 1);
  const counts = ranges.map(
    ([from, to]) =>
      retries.filter(([, score]) => {
        const due = delayedDueAt(score);
        return due >= from && due < to;
      }).length,
  );
  const upcoming = await readDelayed(
    redis,
    queue,
    retries.slice(0, limit).map(([id, score]) => [id, score] as const),
    prefix,
  );
  return {
    counts,
    upcoming,
    retriesOnly: {
      only: 'retries' as const,
      /** Delayed jobs that have not run yet (added with a delay), among those read. */
      notRetries: scan.entries.length - retries.length,
      /** Whether the delayed set held more than were read (counts cover the soonest only). */
      partial: scan.total > scan.entries.length,
    },
  };
}
