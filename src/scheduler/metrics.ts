import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { libraryLogger, type Logger, type LoggerOption } from '../config/logger.js';
import { breakerStateView, type ShownBreakerPhase } from '../policy/breaker/breaker-state.js';
import type { BreakerState } from '../policy/breaker/breaker.js';
import type { BreakerStore } from '../redis/breaker-store.js';
import type { BudgetStore, BudgetStatus } from '../redis/budget-store.js';
import { withDeadline } from '../util/lifecycle.js';
import type { KeyLimits } from './key-limits.js';
import { readLimits, registerLimitGauges, type LimitReading } from './limit-metrics.js';
import type { QueueCounts, RequeueQueue } from './queue.js';
import { queueBreakerKey, type RequeueWorker } from './requeue-worker.js';

/** Options of {@link RequeueMetrics}. */
export interface RequeueMetricsOptions {
  /**
   * Add prom-client's default process metrics (CPU, memory, event loop lag,
   * GC, handles) to the registry, unless it has them already.
   * @defaultValue `true`
   */
  processMetrics?: boolean;
  /** Where a failed or slow scrape-time read is reported. @defaultValue warnings on stderr */
  logger?: LoggerOption;
  /**
   * How long the scrape-time reads of Redis may take; past it the queue's
   * gauges are left out of that scrape. @defaultValue `5000`
   */
  readTimeoutMs?: number;
}

/**
 * prom-client's default metrics that `promtool check metrics` refuses (gauges
 * named `_total`); each is the sum of a labelled gauge that stays
 * (`nodejs_active_handles{type}`, …).
 */
const gaugesNamedTotal = [
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
];

/** The phases a breaker reports in `requeue_breaker_state` and `requeue_breaker_keys`. */
const phases: readonly ShownBreakerPhase[] = ['closed', 'open', 'half-open'];

/** What one scrape reads of one queue; a part is absent when not watched or not readable. */
interface QueueReading {
  counts?: QueueCounts;
  breaker?: { queue: ShownBreakerPhase; keys: Record<ShownBreakerPhase, number> };
  budget?: BudgetStatus;
  limits?: LimitReading;
}

/**
 * Prometheus metrics for requeue: counters and histograms fed by the
 * workers' events, and gauges (jobs per state, DLQ size, breaker states,
 * budget tokens) read from Redis at scrape time with reads only. Labels stay
 * low-cardinality (queue, reason, state): per-endpoint breaker keys are
 * counted by state, never labels, and adaptive limits are summed per queue
 * (`limit-metrics.ts`).
 */
export class RequeueMetrics {
  readonly registry: Registry;
  private readonly completed: Counter<'queue'>;
  private readonly retries: Counter<'queue' | 'source'>;
  private readonly dead: Counter<'queue' | 'reason'>;
  private readonly failures: Counter<'queue' | 'reason'>;
  private readonly disabled: Counter<'queue' | 'cause'>;
  private readonly deferred: Counter<'queue'>;
  private readonly transitions: Counter<'queue' | 'transition'>;
  private readonly budgetExhausted: Counter<'queue' | 'action'>;
  private readonly retryDelay: Histogram<'queue'>;
  private readonly retentionRemoved: Counter<'queue' | 'reason'>;
  private readonly attempts: Histogram<'queue'>;
  private readonly latency: Histogram<'queue'>;
  private readonly lateness: Histogram<'queue'>;
  private readonly queues = new Set<RequeueQueue>();
  /** The watched workers, by queue: their clock readings (no Redis read at scrape). */
  private readonly clocks = new Map<string, RequeueWorker<unknown, unknown>>();
  /** Breaker and budget stores of the watched workers, by queue. */
  private readonly stores = new Map<
    string,
    { breakers?: BreakerStore; budget?: BudgetStore; limits?: KeyLimits }
  >();
  private reading: Promise<Map<string, QueueReading>> | undefined;
  private readonly logger: Logger;
  private readonly readTimeoutMs: number;

  constructor(registry: Registry = new Registry(), options: RequeueMetricsOptions = {}) {
    this.registry = registry;
    this.logger = libraryLogger(options.logger);
    this.readTimeoutMs = options.readTimeoutMs ?? 5_000;
    if (
      (options.processMetrics ?? true) &&
      !registry.getSingleMetric('process_start_time_seconds')
    ) {
      collectDefaultMetrics({ register: registry });
      for (const name of gaugesNamedTotal) registry.removeSingleMetric(name);
    }
    const registers = [registry];
    this.completed = new Counter({
      name: 'requeue_jobs_completed_total',
      help: 'Jobs completed',
      labelNames: ['queue'],
      registers,
    });
    this.retries = new Counter({
      name: 'requeue_retries_scheduled_total',
      help: 'Retries scheduled, by where the delay came from (strategy, server, budget)',
      labelNames: ['queue', 'source'],
      registers,
    });
    this.dead = new Counter({
      name: 'requeue_jobs_dead_lettered_total',
      help: 'Jobs moved to the DLQ',
      labelNames: ['queue', 'reason'],
      registers,
    });
    this.failures = new Counter({
      name: 'requeue_attempt_failures_total',
      help: "Failed attempts by the classifier's reason (http-status, network, timeout, tls-certificate, …)",
      labelNames: ['queue', 'reason'],
      registers,
    });
    this.disabled = new Counter({
      name: 'requeue_endpoints_disabled_total',
      help: 'Webhook endpoints disabled by the workers, by cause (gone: a 410; failing: auto-disable)',
      labelNames: ['queue', 'cause'],
      registers,
    });
    this.deferred = new Counter({
      name: 'requeue_jobs_deferred_total',
      help: 'Jobs put back without running: an open circuit, a paused key or a full bulkhead',
      labelNames: ['queue'],
      registers,
    });
    this.transitions = new Counter({
      name: 'requeue_breaker_transitions_total',
      help: 'Circuit breaker transitions seen by this process',
      labelNames: ['queue', 'transition'],
      registers,
    });
    this.budgetExhausted = new Counter({
      name: 'requeue_budget_exhausted_total',
      help: 'Retries refused by an empty retry budget',
      labelNames: ['queue', 'action'],
      registers,
    });
    this.retryDelay = new Histogram({
      name: 'requeue_retry_delay_seconds',
      help: 'Delay chosen for each retry',
      labelNames: ['queue'],
      buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 30, 60, 300, 1800],
      registers,
    });
    this.retentionRemoved = new Counter({
      name: 'requeue_dlq_retention_removed_total',
      help: 'Dead jobs removed by the DLQ retention, by why (age, count)',
      labelNames: ['queue', 'reason'],
      registers,
    });
    this.attempts = new Histogram({
      name: 'requeue_job_attempts',
      help: 'Attempts each completed job took, the successful one included (deferrals not counted)',
      labelNames: ['queue'],
      buckets: [1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 50],
      registers,
    });
    this.latency = new Histogram({
      name: 'requeue_job_latency_seconds',
      help: 'From enqueue (or replay from the DLQ) to completion, for completed jobs',
      labelNames: ['queue'],
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600, 21600, 86400],
      registers,
    });
    this.lateness = new Histogram({
      name: 'requeue_retry_lateness_seconds',
      help: 'How late a retry or deferred job started: actual start minus its scheduled time (an early start counts as 0)',
      labelNames: ['queue'],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });

    const read = (): Promise<Map<string, QueueReading>> => this.read();
    new Gauge({
      name: 'requeue_jobs',
      help: 'Jobs per state (waiting, active, delayed, completed, failed, dead)',
      labelNames: ['queue', 'state'],
      registers,
      async collect() {
        const readings = await read();
        this.reset();
        for (const [queue, r] of readings)
          if (r.counts)
            for (const [state, n] of Object.entries(r.counts)) this.set({ queue, state }, n);
      },
    });
    new Gauge({
      name: 'requeue_dlq_jobs',
      help: "Dead jobs in the queue's dead-letter queue",
      labelNames: ['queue'],
      registers,
      async collect() {
        const readings = await read();
        this.reset();
        for (const [queue, r] of readings) if (r.counts) this.set({ queue }, r.counts.dead);
      },
    });
    new Gauge({
      name: 'requeue_breaker_state',
      help: "The queue-wide circuit breaker's state: 1 for the state it is in, 0 for the others",
      labelNames: ['queue', 'state'],
      registers,
      async collect() {
        const readings = await read();
        this.reset();
        for (const [queue, r] of readings)
          if (r.breaker)
            for (const state of phases)
              this.set({ queue, state }, r.breaker.queue === state ? 1 : 0);
      },
    });
    new Gauge({
      name: 'requeue_breaker_keys',
      help: 'Per-key circuit breakers (e.g. webhook endpoints) by state',
      labelNames: ['queue', 'state'],
      registers,
      async collect() {
        const readings = await read();
        this.reset();
        for (const [queue, r] of readings)
          if (r.breaker)
            for (const state of phases) this.set({ queue, state }, r.breaker.keys[state]);
      },
    });
    const clocks = this.clocks;
    new Gauge({
      name: 'requeue_clock_offset_seconds',
      help: "Redis's clock minus this worker's, as last measured from TIME (warned past 1 s)",
      labelNames: ['queue'],
      registers,
      collect() {
        this.reset();
        for (const [queue, worker] of clocks) {
          const { offsetMs } = worker.clockStatus();
          if (offsetMs !== undefined) this.set({ queue }, offsetMs / 1000);
        }
      },
    });
    new Gauge({
      name: 'requeue_clock_fetch_refused',
      help: 'Whether this worker fetches no job because its clock is past maxClockSkewMs (1) or not (0)',
      labelNames: ['queue'],
      registers,
      collect() {
        this.reset();
        for (const [queue, worker] of clocks)
          this.set({ queue }, worker.clockStatus().refusing ? 1 : 0);
      },
    });
    new Gauge({
      name: 'requeue_budget_tokens',
      help: 'Tokens left in the retry budget (token bucket)',
      labelNames: ['queue'],
      registers,
      async collect() {
        const readings = await read();
        this.reset();
        for (const [queue, r] of readings)
          if (r.budget?.kind === 'token-bucket') this.set({ queue }, r.budget.tokens);
      },
    });
    registerLimitGauges(registers, read);
  }

  /** Counts what a worker does, and reads its breaker and budget on each scrape. */
  watch(worker: RequeueWorker<unknown, unknown>): void {
    const queue = worker.name;
    this.clocks.set(queue, worker);
    worker.on('job:completed', (e) => {
      this.completed.inc({ queue });
      this.attempts.observe({ queue }, e.attempt);
      this.latency.observe({ queue }, Math.max(0, e.finishedAt - e.enqueuedAt) / 1000);
    });
    worker.on('retry:started', (e) =>
      this.lateness.observe({ queue }, Math.max(0, e.startedAt - e.scheduledAt) / 1000),
    );
    worker.on('retry:scheduled', (e) => {
      this.failures.inc({ queue, reason: e.record.classification ?? 'unknown' });
      this.retries.inc({ queue, source: e.record.delaySource ?? 'strategy' });
      this.retryDelay.observe({ queue }, e.delayMs / 1000);
    });
    worker.on('job:dead-lettered', (e) => {
      this.dead.inc({ queue, reason: e.record.reason });
      const last = e.record.history.at(-1);
      if (last?.outcome === 'failed')
        this.failures.inc({ queue, reason: last.classification ?? 'unknown' });
    });
    worker.on('job:deferred', () => this.deferred.inc({ queue }));
    worker.on('endpoint:disabled', (e) => this.disabled.inc({ queue, cause: e.cause }));
    worker.on('breaker:opened', () => this.transitions.inc({ queue, transition: 'opened' }));
    worker.on('breaker:half-open', () => this.transitions.inc({ queue, transition: 'half-open' }));
    worker.on('breaker:closed', () => this.transitions.inc({ queue, transition: 'closed' }));
    worker.on('budget:exhausted', (e) => this.budgetExhausted.inc({ queue, action: e.action }));
    worker.on('dlq:trimmed', (e) => {
      this.retentionRemoved.inc({ queue, reason: 'age' }, e.byAge);
      this.retentionRemoved.inc({ queue, reason: 'count' }, e.byCount);
    });
    const { breakers, budget } = worker.gate;
    const limits = worker.limits;
    if (breakers || budget || limits)
      this.stores.set(queue, {
        ...(breakers && { breakers }),
        ...(budget && { budget }),
        ...(limits && { limits }),
      });
  }

  /** Reports a queue's job counts and DLQ size on each scrape. */
  watchQueue(queue: RequeueQueue): void {
    this.queues.add(queue);
  }

  /** The text exposition format. */
  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  /** One scrape's reads, shared by every gauge of that scrape (they collect at once). */
  private read(): Promise<Map<string, QueueReading>> {
    this.reading ??= this.readAll().finally(() => {
      this.reading = undefined;
    });
    return this.reading;
  }

  private async readAll(): Promise<Map<string, QueueReading>> {
    const names = new Set([...[...this.queues].map((q) => q.name), ...this.stores.keys()]);
    const readings = new Map<string, QueueReading>();
    await Promise.all(
      [...names].map(async (name) => {
        const outcome = await withDeadline(this.readQueue(name), this.readTimeoutMs).catch(
          (err: unknown) => {
            this.logger.warn({ err, queue: name }, 'metrics: could not read the queue');
            return undefined;
          },
        );
        if (outcome?.kind === 'settled') readings.set(name, outcome.value);
        else if (outcome)
          this.logger.warn(
            { queue: name, timeoutMs: this.readTimeoutMs },
            'metrics: reading the queue took too long; its gauges are left out of this scrape',
          );
      }),
    );
    return readings;
  }

  /** Reads only: BullMQ's counts, ZCARD, HMGET, SMEMBERS (`test/integration/read-only-dlq-metrics.test.ts`). */
  private async readQueue(name: string): Promise<QueueReading> {
    const queue = [...this.queues].find((q) => q.name === name);
    const stores = this.stores.get(name);
    const [counts, breaker, budget, limits] = await Promise.all([
      queue?.counts(),
      stores?.breakers ? readBreakers(stores.breakers) : undefined,
      stores?.budget?.status(),
      stores?.limits ? readLimits(stores.limits) : undefined,
    ]);
    return {
      ...(counts && { counts }),
      ...(breaker && { breaker }),
      ...(budget && { budget }),
      ...(limits && { limits }),
    };
  }
}

/** The queue-wide breaker's phase and the keyed breakers counted by phase. */
async function readBreakers(
  store: BreakerStore,
): Promise<{ queue: ShownBreakerPhase; keys: Record<ShownBreakerPhase, number> }> {
  const [known, notClosed] = await Promise.all([store.knownKeys(), store.openBreakers()]);
  const keys: Record<ShownBreakerPhase, number> = { closed: 0, open: 0, 'half-open': 0 };
  for (const key of known) {
    if (key === queueBreakerKey) continue;
    keys[shownPhase(notClosed.get(key))] += 1;
  }
  return { queue: shownPhase(notClosed.get(queueBreakerKey)), keys };
}

/** A phase as the metrics show it (an isolated circuit is open). */
function shownPhase(state: BreakerState | undefined): ShownBreakerPhase {
  return state ? breakerStateView(state).state : 'closed';
}
