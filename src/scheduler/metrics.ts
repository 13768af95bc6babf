import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { RequeueQueue } from './queue.js';
import type { RequeueWorker } from './worker.js';

/**
 * Prometheus metrics for requeue, fed by the workers' events. Labels stay
 * low-cardinality (queue, reason, transition): per-endpoint breaker keys are
 * not labels.
 */
export class RequeueMetrics {
  readonly registry: Registry;
  private readonly completed: Counter<'queue'>;
  private readonly retries: Counter<'queue' | 'source'>;
  private readonly dead: Counter<'queue' | 'reason'>;
  private readonly deferred: Counter<'queue'>;
  private readonly transitions: Counter<'queue' | 'transition'>;
  private readonly budgetExhausted: Counter<'queue' | 'action'>;
  private readonly retryDelay: Histogram<'queue'>;
  private readonly retentionRemoved: Counter<'queue' | 'reason'>;
  private readonly queues = new Set<RequeueQueue>();

  constructor(registry: Registry = new Registry()) {
    this.registry = registry;
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
    this.deferred = new Counter({
      name: 'requeue_jobs_deferred_total',
      help: 'Jobs put back by an open circuit',
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
    const queues = this.queues;
    new Gauge({
      name: 'requeue_jobs',
      help: 'Jobs per state (waiting, active, delayed, completed, failed, dead)',
      labelNames: ['queue', 'state'],
      registers,
      async collect() {
        for (const queue of queues) {
          const counts = await queue.counts();
          for (const [state, n] of Object.entries(counts))
            this.set({ queue: queue.name, state }, n);
        }
      },
    });
  }

  /** Counts what a worker does. */
  watch(worker: RequeueWorker<unknown, unknown>): void {
    const queue = worker.name;
    worker.on('job:completed', () => this.completed.inc({ queue }));
    worker.on('retry:scheduled', (e) => {
      this.retries.inc({ queue, source: e.record.delaySource ?? 'strategy' });
      this.retryDelay.observe({ queue }, e.delayMs / 1000);
    });
    worker.on('job:dead-lettered', (e) => this.dead.inc({ queue, reason: e.record.reason }));
    worker.on('job:deferred', () => this.deferred.inc({ queue }));
    worker.on('breaker:opened', () => this.transitions.inc({ queue, transition: 'opened' }));
    worker.on('breaker:half-open', () => this.transitions.inc({ queue, transition: 'half-open' }));
    worker.on('breaker:closed', () => this.transitions.inc({ queue, transition: 'closed' }));
    worker.on('budget:exhausted', (e) => this.budgetExhausted.inc({ queue, action: e.action }));
    worker.on('dlq:trimmed', (e) => {
      this.retentionRemoved.inc({ queue, reason: 'age' }, e.byAge);
      this.retentionRemoved.inc({ queue, reason: 'count' }, e.byCount);
    });
  }

  /** Reports a queue's job counts on each scrape. */
  watchQueue(queue: RequeueQueue): void {
    this.queues.add(queue);
  }

  /** The text exposition format. */
  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
