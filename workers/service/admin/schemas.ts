import { z } from 'zod';
import { deadReasons } from '../../../src/errors/dead-reason.js';
import { limits } from '../../../src/policy/limits.js';

/**
 * The admin API's request schemas: validated by fastify-type-provider-zod
 * (a bad request gets a 400 naming the field) and turned into the OpenAPI
 * document by `jsonSchemaTransform`.
 */

/** A time: milliseconds since the epoch, or an ISO 8601 date (validated; {@link parseTime} reads it). */
export const time = z
  .string()
  .regex(
    /^(\d{1,15}|\d{4}-\d{2}-\d{2}([T ][\d:.]+)?(Z|[+-]\d{2}:?\d{2})?)$/,
    'expected milliseconds since the epoch or an ISO 8601 date',
  )
  .refine((v) => Number.isFinite(parseTime(v)), 'not a valid date')
  .describe('ms since the epoch or an ISO 8601 date');

/** A validated {@link time} as ms since the epoch. */
export function parseTime(value: string): number {
  return /^\d+$/.test(value) ? Number(value) : Date.parse(value);
}

export const queueParams = z.strictObject({
  queue: z
    .string()
    .min(1)
    .max(limits.queueName * 3),
});
export const jobParams = queueParams.extend({ id: z.string().min(1).max(1024) });
export const endpointParams = queueParams.extend({ endpointId: z.string().min(1).max(1024) });

/** Which dead jobs a list or count applies to. */
export const deadFilterQuery = z.strictObject({
  reason: z.enum(deadReasons).optional(),
  name: z.string().min(1).max(limits.jobName).optional(),
  since: time.optional(),
  until: time.optional(),
});

export const deadListQuery = deadFilterQuery.extend({
  limit: z.coerce.number().int().min(1).max(limits.listLimit).default(50),
  offset: z.coerce.number().int().min(0).max(limits.retentionCount).default(0),
});

/** Replay and purge act on everything only when asked to with `all: true`, as the CLI's `--all`. */
export const deadBulkBody = z
  .strictObject({
    id: z.string().min(1).max(1024).optional(),
    reason: z.enum(deadReasons).optional(),
    name: z.string().min(1).max(limits.jobName).optional(),
    since: time.optional(),
    until: time.optional(),
    all: z.boolean().optional(),
  })
  .refine((b) => b.id !== undefined || b.reason !== undefined || b.all === true, {
    message: 'give id, reason or all: true',
    path: ['all'],
  });

export const scheduleQuery = z.strictObject({
  /** The timeline's span: the next minute (1 s bins), hour (1 min bins) or day (15 min bins). */
  horizon: z.enum(['minute', 'hour', 'day']).default('hour'),
  /** How many of the soonest delayed jobs to list. */
  limit: z.coerce.number().int().min(0).max(500).default(20),
  /**
   * `retries`: only jobs that ran and were delayed again (retries, deferrals),
   * not jobs added with a delay; `all`: every delayed job.
   */
  only: z.enum(['retries', 'all']).default('all'),
});

export const limitsQuery = z.strictObject({
  /** How many keys to list, those touched last first. */
  max: z.coerce.number().int().min(1).max(limits.listLimit).default(100),
});

export const breakerKeyBody = z
  .strictObject({ key: z.string().min(1).max(1024).optional() })
  .prefault({});

export const breakerCloseBody = z
  .strictObject({
    key: z.string().min(1).max(1024).optional(),
    /** Also refill the retry budget. */
    resetBudget: z.boolean().optional(),
  })
  .prefault({});

export const endpointDisableBody = z
  .strictObject({
    reason: z.string().trim().min(1).max(500).default('disabled by an operator'),
  })
  .prefault({});
