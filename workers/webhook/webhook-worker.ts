import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { parseConfig } from '../../src/config/env.js';
import { libraryLogger } from '../../src/config/logger.js';
import { resolveRedis, type RedisClient } from '../../src/redis/connection.js';
import { EndpointStore } from '../../src/redis/endpoint-store.js';
import type { WorkerEvents } from '../../src/scheduler/events.js';
import type { BreakerOptionsInput } from '../../src/policy/breaker/breaker-options.js';
import { limits } from '../../src/policy/limits.js';
import { webhookRetryPolicy } from '../../src/policy/webhook-policy.js';
import type { AdaptiveConcurrencyInput } from '../../src/policy/limit/limit-options.js';
import {
  RequeueWorker,
  type RequeueJob,
  type WorkerOptions,
} from '../../src/scheduler/requeue-worker.js';
import { defaultSecretHeaders } from '../../src/util/redact.js';
import { systemClock } from '../../src/util/system.js';
import { deliverWebhook, type DeliveryResult } from './deliver.js';
import { webhookJobSchema, type WebhookJob } from './webhook-job.js';
import { EndpointRegistry } from '../../src/redis/endpoint-registry.js';
import { currentDelivery, endpointRateLimit } from './registered-endpoint.js';
import type { DeliveryLog, DeliveryLogOptionsInput } from './delivery-log.js';
import { deliveryLogRecorder, type DeliveryLogRecorder } from './delivery-log-recorder.js';
import { autoDisableSchema, EndpointHealth, type AutoDisableInput } from './endpoint-health.js';
import { createSsrfGuard, type SsrfOptions } from './ssrf.js';

export {
  enqueueWebhook,
  webhookJobKey,
  webhookJobSchema,
  type EnqueueWebhookOptions,
  type WebhookJob,
  type WebhookJobInput,
} from './webhook-job.js';

/**
 * The breaker every webhook process runs unless told otherwise. It counts
 * what says an endpoint is down (timeouts, refused connections, 5xx; never a
 * 429, which only pauses the endpoint), by event: an event counts once,
 * by its latest attempt, so one whose retry is delivered takes its failure
 * back and a flaky endpoint whose retries succeed does not look down. It
 * trips when nearly every event fails (95 % of at least 20 in 90 s: a
 * hanging endpoint's timeouts reach 20 events within the window even
 * through its bulkhead of 4, at 75 s; an endpoint with fewer events than
 * that in the window never trips), stays open 5 s (doubling up to
 * 30 s while it keeps failing), then lets retries probe first (first
 * attempts 1 s later), one at a time and one more per success, and closes
 * when 2 of 4 succeed; 3 failed probes reopen it. Down, an endpoint gets at
 * most 3 requests per open period: ≤ 3 per 30 s once the period is at its cap.
 * An endpoint idle 5 minutes leaves no breaker state (it starts closed).
 */
export const webhookBreakerDefaults = Object.freeze({
  failureRate: 0.95,
  minimumRequests: 20,
  windowMs: 90_000,
  buckets: 18,
  openMs: 5_000,
  openFactor: 2,
  maxOpenMs: 30_000,
  halfOpenProbes: 4,
  halfOpenSuccessRatio: 0.5,
  halfOpenRetryMs: 500,
  firstTryProbeDelayMs: 1_000,
  probeTimeoutMs: 20_000,
  idleMs: 300_000,
}) satisfies BreakerOptionsInput;

/**
 * The adaptive concurrency every webhook process runs unless told otherwise:
 * the deliveries in flight to one endpoint, across every worker, start at 10
 * and follow what the endpoint shows — one more per round trip while it
 * answers within 10 s, ×0.7 on a timeout or a retryable failure (5xx,
 * refused) or a 429 (then back in 2 s along CUBIC's curve; the endpoint is
 * paused whole only when it keeps answering 429) — between 1 and 100. A
 * lease outlives the delivery timeout (plus the body's). An endpoint idle 5
 * minutes leaves no limit state.
 */
export const webhookAdaptiveDefaults = Object.freeze({
  floor: 1,
  ceiling: 100,
  initial: 10,
  latencyTargetMs: 10_000,
  idleMs: 300_000,
}) satisfies AdaptiveConcurrencyInput;

/** Defaults of a webhook worker, the same for the standalone process and the service. */
export const webhookWorkerDefaults = Object.freeze({
  concurrency: 16,
  timeoutMs: 15_000,
  /**
   * BullMQ renews a running job's lock every half of this, so it can be far
   * shorter than a delivery: a killed worker's deliveries are back within
   * lock + stalled check ≈ 15 s.
   */
  lockDurationMs: 10_000,
  stalledIntervalMs: 5_000,
});

/** Options of {@link createWebhookWorker}. */
export interface WebhookWorkerOptions
  extends
    Omit<WorkerOptions<WebhookJob>, 'schema' | 'breakerKey' | 'breaker' | 'adaptiveConcurrency'>,
    SsrfOptions {
  /**
   * The per-endpoint breaker, over {@link webhookBreakerDefaults}; `false`
   * turns it off. @defaultValue {@link webhookBreakerDefaults}
   */
  breaker?: BreakerOptionsInput | false;
  /**
   * The per-endpoint adaptive concurrency, over {@link webhookAdaptiveDefaults};
   * `false` turns it off. @defaultValue {@link webhookAdaptiveDefaults}
   */
  adaptiveConcurrency?: AdaptiveConcurrencyInput | false;
  /** Deadline of one delivery attempt until the response's status arrives, in ms. @defaultValue `15_000` */
  timeoutMs?: number;
  /** How long a response body may take once its status arrived. @defaultValue `1_000` */
  bodyTimeoutMs?: number;
  /** @defaultValue `'requeue-webhooks/0.1'` */
  userAgent?: string;
  /** Bytes of each response body kept in the attempt history. @defaultValue `512` */
  maxBodyBytes?: number;
  /** How long this worker trusts its copy of the disabled endpoints, in ms. @defaultValue `1000` */
  disabledCacheTtlMs?: number;
  /** The disabled-endpoint store; the worker opens one on its connection unless given. */
  endpoints?: EndpointStore;
  /** Registered endpoints, read for deliveries fanned out from messages; opened unless given. */
  registry?: EndpointRegistry;
  /**
   * Request headers whose values are credentials, besides the defaults and names
   * that look secret: scrubbed from what receivers answer. @defaultValue `[]`
   */
  redactHeaders?: readonly string[];
  /** Every attempt, searchable, for `retentionMs`; `false`: none. @defaultValue `{}` (30 days) */
  deliveryLog?: DeliveryLogOptionsInput | DeliveryLog | false;
  /**
   * Disables an endpoint whose deliveries all failed for `afterMs`; its deliveries then wait
   * (`recheckMs` at a time) until it is enabled. @defaultValue `{}` (5 days, 10-minute rechecks)
   */
  autoDisable?: AutoDisableInput | false;
  /** Told of each endpoint this worker disables (410 or auto-disable): notify its owner here. */
  onEndpointDisabled?: (event: WorkerEvents['endpoint:disabled'][0]) => void;
}

/**
 * Every 5xx is retried, not only the classifier's default list: receivers
 * sit behind proxies that answer 520–530 for passing trouble, and a sender
 * that gives up on a 501 saves little. Standard Webhooks' senders retry any
 * failure; 4xx other than 408/425/429 stay permanent.
 */
const webhookRetryableStatuses = [
  408,
  425,
  429,
  ...Array.from({ length: 100 }, (_, i) => 500 + i),
] as const;

/**
 * A worker that delivers webhook jobs: validates each job, skips disabled
 * endpoints, POSTs the signed event and keeps each attempt's status, latency
 * and body start in the job's history. A 410 disables the endpoint.
 * Closing it also closes its connection pools and its endpoint store.
 */
export class WebhookWorker extends RequeueWorker<WebhookJob, DeliveryResult> {
  /** The disabled-endpoint store this worker reads and writes. */
  readonly endpoints: EndpointStore;
  /** The delivery log's writer, unless `deliveryLog: false`. */
  readonly deliveryLog: DeliveryLogRecorder | undefined;
  private readonly ownsEndpoints: boolean;
  private readonly agents: { http: HttpAgent; https: HttpsAgent };
  /** The connection this worker opened (from a URL), closed with it. */
  private readonly ownedRedis: RedisClient | undefined;

  constructor(queue: string, options: WebhookWorkerOptions = {}) {
    const {
      timeoutMs = webhookWorkerDefaults.timeoutMs,
      bodyTimeoutMs,
      breaker,
      adaptiveConcurrency,
      userAgent,
      maxBodyBytes,
      allowPrivate,
      allowHosts,
      disabledCacheTtlMs,
      endpoints: givenEndpoints,
      registry: givenRegistry,
      redactHeaders = [],
      deliveryLog,
      autoDisable,
      onEndpointDisabled,
      ...workerOptions
    } = options;
    const clock = options.clock ?? systemClock;
    const rootLogger = libraryLogger(options.logger);
    const logger = rootLogger.child({ queue, worker: 'webhook' });
    const guard = createSsrfGuard({ allowPrivate, allowHosts });
    const autoDisableOptions =
      autoDisable !== false && parseConfig(autoDisableSchema, autoDisable, 'autoDisable');
    const secretHeaders = [...defaultSecretHeaders, ...redactHeaders];
    // Pools of this worker alone: their sockets were all checked under this guard.
    const agents = {
      http: new HttpAgent({ keepAlive: true }),
      https: new HttpsAgent({ keepAlive: true }),
    };
    // One connection for the worker and the store; closed here when opened here.
    const { redis, owned } = resolveRedis(workerOptions.connection);
    const registry = givenRegistry ?? new EndpointRegistry({ connection: redis, clock });
    const endpoints =
      givenEndpoints ??
      new EndpointStore({
        connection: redis,
        clock,
        ...(disabledCacheTtlMs !== undefined ? { cacheTtlMs: disabledCacheTtlMs } : {}),
      });
    const recorder = deliveryLogRecorder(deliveryLog, redis, queue, clock, logger);
    let announce: (e: WorkerEvents['endpoint:disabled'][0]) => void = () => {}; // this.safeEmit, below
    const health = new EndpointHealth({
      redis,
      queue,
      endpoints,
      clock,
      logger,
      options: autoDisableOptions,
      announce: (e) => announce(e),
    });

    const recordOf = (job: WebhookJob) =>
      job.endpoint.registered ? registry.cached(queue, job.endpoint.id) : undefined;
    const handler = async (job: RequeueJob<WebhookJob>): Promise<DeliveryResult> => {
      const record = await recordOf(job.data);
      const data = currentDelivery(queue, job.data, record);
      const { endpoint, event } = data;
      const log = logger.child({ jobId: job.id, attempt: job.attempt, endpointId: endpoint.id });
      await health.check(endpoint.id);
      try {
        const result = await deliverWebhook(data, {
          clock,
          guard,
          agents,
          signal: job.signal,
          onAttempt: (details) => {
            job.annotate({ ...details });
            recorder?.note(job.id, job.attempt, job.data, details);
          },
          timeoutMs,
          secretHeaders: record?.secretHeaders
            ? [...secretHeaders, ...record.secretHeaders]
            : secretHeaders,
          ...(bodyTimeoutMs !== undefined ? { bodyTimeoutMs } : {}),
          ...(userAgent !== undefined ? { userAgent } : {}),
          ...(maxBodyBytes !== undefined ? { maxBodyBytes } : {}),
        });
        log.debug(
          { eventId: event.id, status: result.status, latencyMs: result.latencyMs },
          'webhook delivered',
        );
        health.succeeded(endpoint.id);
        return result;
      } catch (err) {
        throw await health.failed(endpoint.id, endpoint.url, err);
      }
    };

    try {
      super(queue, handler, {
        concurrency: webhookWorkerDefaults.concurrency,
        lockDurationMs: webhookWorkerDefaults.lockDurationMs,
        stalledIntervalMs: webhookWorkerDefaults.stalledIntervalMs,
        policy: webhookRetryPolicy,
        ...workerOptions,
        ...(breaker === false ? {} : { breaker: { ...webhookBreakerDefaults, ...breaker } }),
        adaptiveConcurrency:
          adaptiveConcurrency === false
            ? false
            : {
                ...webhookAdaptiveDefaults,
                leaseMs: Math.min(limits.timeoutMs, timeoutMs + (bodyTimeoutMs ?? 1_000) + 5_000),
                ...adaptiveConcurrency,
              },
        // An endpoint's own limit, else the worker's (a quarter of the slots).
        keyConcurrency: (job) =>
          job.data.endpoint.maxConcurrency ??
          (typeof workerOptions.keyConcurrency === 'number'
            ? workerOptions.keyConcurrency
            : undefined),
        connection: redis,
        logger: rootLogger,
        schema: webhookJobSchema,
        classify: { retryableStatuses: [...webhookRetryableStatuses], ...workerOptions.classify },
        breakerKey: (job) => job.data.endpoint.id,
        rateLimit: async (job) => endpointRateLimit(job.data, await recordOf(job.data)),
      });
    } catch (err) {
      // A bad option (policy, breaker…): do not leave a connection holding the process open.
      if (owned) redis.disconnect();
      throw err;
    }
    this.endpoints = endpoints;
    this.deliveryLog = recorder;
    recorder?.attach(this);
    announce = (e) => this.safeEmit(logger, 'endpoint:disabled', e);
    if (onEndpointDisabled) this.on('endpoint:disabled', onEndpointDisabled);
    this.ownsEndpoints = givenEndpoints === undefined;
    this.agents = agents;
    this.ownedRedis = owned ? redis : undefined;
  }

  override async close(options: { timeoutMs?: number } = {}): Promise<void> {
    await super.close(options);
    await this.deliveryLog?.close();
    this.agents.http.destroy();
    this.agents.https.destroy();
    if (this.ownsEndpoints) await this.endpoints.close();
    this.ownedRedis?.disconnect();
  }
}

/** Creates a {@link WebhookWorker} for `queue`. */
export function createWebhookWorker(
  queue: string,
  options: WebhookWorkerOptions = {},
): WebhookWorker {
  return new WebhookWorker(queue, options);
}
