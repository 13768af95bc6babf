import type { Logger } from '../../../src/config/logger.js';
import {
  parseBreakerOptions,
  type BreakerOptions,
} from '../../../src/policy/breaker/breaker-options.js';
import type { BudgetOptions } from '../../../src/policy/budget/budget-options.js';
import { BreakerStore } from '../../../src/redis/breaker-store.js';
import { BudgetStore } from '../../../src/redis/budget-store.js';
import type { RedisClient } from '../../../src/redis/connection.js';
import { PauseStore } from '../../../src/redis/pause-store.js';
import { LimitStore } from '../../../src/redis/limit-store.js';
import {
  DeadLetterQueue,
  type DeadJobFilter,
  type DeadJobRecord,
} from '../../../src/scheduler/dlq/dead-letter-queue.js';
import type { RequeueQueue } from '../../../src/scheduler/queue.js';
import { defaultSecretHeaders, redactValue } from '../../../src/util/redact.js';
import { systemClock, type Clock } from '../../../src/util/system.js';
import { HttpError } from '../http.js';
import type { SsrfOptions } from '../../webhook/ssrf.js';
import type { AdminAccess } from './access.js';
import { parseTime } from './schemas.js';

/** A queue the service runs, as the admin API sees it. */
export interface AdminQueue {
  name: string;
  /**
   * `webhook`: the delivery queue, whose breaker keys are endpoint ids;
   * `amqp` / `nats`: a broker consumer's retry queue (its worker runs elsewhere).
   */
  kind: 'webhook' | 'handler' | 'amqp' | 'nats';
  /** For `amqp` / `nats`: the consumer's source, the AMQP queue or `<stream>/<consumer>`. */
  source?: string;
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
  /** The SSRF guard's options for endpoint URLs written through the API. @defaultValue public addresses only */
  endpointWrites?: SsrfOptions;
}

/** The stores of one queue, made once. */
export interface QueueStores extends AdminQueue {
  dlq: DeadLetterQueue;
  breakers: BreakerStore;
  budgetStore: BudgetStore | undefined;
  pauses: PauseStore;
  /** The fleet's adaptive concurrency limits per key (reads only here). */
  limits: LimitStore;
  /** BullMQ's key prefix of the queue (with its hash tag on a cluster). */
  prefix: string;
}

/** What every resource plugin of the admin API shares, made once per mount. */
export interface AdminContext {
  options: AdminApiOptions;
  clock: Clock;
  /** Every queue's stores, in the service's order. */
  stores: ReadonlyMap<string, QueueStores>;
  /** The stores of queue `name`; a 404 naming the known queues if there is none. */
  storesOf(name: string): QueueStores;
  /** Every view leaves through here (promise 9). */
  redact(value: unknown): unknown;
}

/** The options each resource plugin is registered with. */
export interface AdminPluginOptions {
  ctx: AdminContext;
}

/** Builds the admin API's shared context from its options. */
export function adminContext(options: AdminApiOptions): AdminContext {
  const headers = [...defaultSecretHeaders, ...options.redactHeaders];
  const stores = new Map<string, QueueStores>(
    options.queues.map((q) => [
      q.name,
      {
        ...q,
        dlq: new DeadLetterQueue(q.name, { connection: options.redis, logger: options.logger }),
        breakers: new BreakerStore(options.redis, q.name, q.breaker ?? parseBreakerOptions({})),
        budgetStore: q.budget ? new BudgetStore(options.redis, q.name, q.budget) : undefined,
        pauses: new PauseStore(options.redis, q.name),
        limits: new LimitStore(options.redis, q.name),
        prefix: q.queue.prefix,
      },
    ]),
  );
  return {
    options,
    clock: options.clock ?? systemClock,
    stores,
    storesOf(name) {
      const found = stores.get(name);
      if (!found)
        throw new HttpError(404, `no queue "${name}" here`, { queues: [...stores.keys()] });
      return found;
    },
    redact: (value) => redactValue(value, { headers }),
  };
}

/** A DLQ filter from the query or body fields the routes accept. */
export function toFilter(query: {
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

/** A dead job as the jobs and DLQ routes show it. */
export function deadJobView(r: DeadJobRecord) {
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
