/**
 * Resend and recover (issue 24, item 5): a delivered message sent again to
 * one endpoint as a job of its own, and an endpoint's dead deliveries
 * brought back in their own fair-dispatch lane, rate-limited, with a dry run.
 * Both are the library's fenced moves: an idempotent add, and the DLQ's
 * generation-fenced replay.
 */
import { ResendError } from '../../src/errors/resend-error.js';
import { dispatchCost } from '../../src/policy/dispatch.js';
import type { RedisClient } from '../../src/redis/connection.js';
import { readLiveJob } from '../../src/scheduler/bullmq/bull-reads.js';
import type {
  BulkProgress,
  DeadJobFilter,
  DeadLetterQueue,
  ReplayResult,
} from '../../src/scheduler/dlq/dead-letter-queue.js';
import { jobIdForKey } from '../../src/scheduler/job-id.js';
import type { RequeueQueue } from '../../src/scheduler/queue.js';
import { isObject } from '../../src/util/json.js';
import type { Clock } from '../../src/util/system.js';
import { enqueueWebhook, resendJobKey, webhookJobKey, webhookJobSchema } from './webhook-job.js';

/** Resends of one message to one endpoint, at most. */
export const maxResends = 100;

/** A resend made. */
export interface Resent {
  endpointId: string;
  messageId: string;
  /** Which resend this is (1 for the first). */
  resend: number;
  /** The new delivery's job id. */
  deliveryId: string;
}

/** Options of {@link resendMessage}. */
export interface ResendOptions {
  /** The queue's Redis, to read the delivered job. */
  redis: RedisClient;
  clock?: Clock;
}

/**
 * Sends a delivered message to one endpoint again: a new delivery job with
 * the same `webhook-id` (the receiver can dedupe) and body, its own history
 * and delivery-log entries, keyed `<endpoint>/<message>.resend-<n>` with the
 * first free n — two operators clicking at once make one resend. Refused
 * (a {@link ResendError}) unless the message's delivery to it completed.
 */
export async function resendMessage(
  queue: RequeueQueue,
  endpointId: string,
  messageId: string,
  { redis, clock }: ResendOptions,
): Promise<Resent> {
  const ref = { endpoint: { id: endpointId }, event: { id: messageId } } as const;
  const key = webhookJobKey(ref as never);
  const job = await readLiveJob(redis, queue.name, jobIdForKey(key), queue.prefix);
  if (!job)
    throw new ResendError(
      `no delivery of message "${messageId}" to endpoint "${endpointId}" in ${queue.name} (completed ones are kept 7 days)`,
      'not-found',
    );
  if (job.where !== 'completed')
    throw new ResendError(
      `message "${messageId}" was not delivered to "${endpointId}" (it is ${job.where}): retry it now or recover it instead`,
      'not-delivered',
    );
  const data = webhookJobSchema.parse(job.data);
  const rq = isObject(job.opts.rq) ? job.opts.rq : {};
  for (let n = 1; n <= maxResends; n++) {
    if (await queue.hasJob(jobIdForKey(resendJobKey(data, n)))) continue;
    const added = await enqueueWebhook(queue, data, {
      resend: n,
      ...(clock ? { clock } : {}),
      ...(isObject(rq.policy) ? { policy: rq.policy as never } : {}),
    });
    return { endpointId, messageId, resend: n, deliveryId: added.id };
  }
  throw new ResendError(
    `message "${messageId}" was resent to "${endpointId}" ${maxResends} times already`,
    'too-many',
  );
}

/** The share of turns a recovery takes while live deliveries wait: 1 in 100 of one endpoint's. */
export const defaultRecoverWeight = 0.01;
/** Dead deliveries a recovery moves back per second, unless told. */
export const defaultRecoverRatePerSec = 100;

/** The fair-dispatch lane an endpoint's recovered deliveries take their turns in (no endpoint id has a `/`). */
export function recoverLane(endpointId: string): string {
  return `recover/${endpointId}`;
}

/** Options of {@link recoverEndpoint}. */
export interface RecoverOptions {
  /** Dead at or after this time (ms since epoch). */
  since: number;
  /** Dead before this time (ms since epoch). @defaultValue now */
  until?: number;
  /** Only count what would be recovered. */
  dryRun?: boolean;
  /** Deliveries moved back per second. @defaultValue {@link defaultRecoverRatePerSec} */
  ratePerSec?: number;
  /** The recovery lane's weight in fair dispatch (a live endpoint's is 1). @defaultValue {@link defaultRecoverWeight} */
  weight?: number;
  onProgress?: (progress: BulkProgress) => void;
  signal?: AbortSignal;
}

/** What a recovery did, or would do. */
export type RecoverResult =
  | { dryRun: true; endpointId: string; count: number }
  | ({ dryRun: false; endpointId: string } & ReplayResult);

/**
 * Brings back every dead delivery of `endpointId` that died in
 * [`since`, `until`): the DLQ's replay (each record moves only if it is
 * still the death read; one that dies again meanwhile is left alone), at
 * most `ratePerSec`, into the lane {@link recoverLane} — a fair-dispatch
 * key of low weight that gives them their turns (each keeps its endpoint as
 * its own key, so parking a saturated endpoint sweeps them with its live
 * ones), so live deliveries of the same and other endpoints take their
 * turns first while recovered ones wait. A dry run only counts.
 */
export async function recoverEndpoint(
  dlq: DeadLetterQueue,
  endpointId: string,
  options: RecoverOptions,
): Promise<RecoverResult> {
  const filter: DeadJobFilter = {
    tags: { endpoint: endpointId },
    since: options.since,
    ...(options.until !== undefined ? { until: options.until } : {}),
  };
  if (options.dryRun) return { dryRun: true, endpointId, count: await dlq.count(filter) };
  const result = await dlq.replay(filter, {
    ratePerSec: options.ratePerSec ?? defaultRecoverRatePerSec,
    lane: {
      key: recoverLane(endpointId),
      cost: dispatchCost(options.weight ?? defaultRecoverWeight),
    },
    ...(options.onProgress ? { onProgress: options.onProgress } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
  });
  return { dryRun: false, endpointId, ...result };
}
