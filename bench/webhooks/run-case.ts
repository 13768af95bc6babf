import { performance } from 'node:perf_hooks';
// The built package, as users run it (`npm run build` first; the bench script does).
import { createQueue, type QueueCounts } from 'requeue';
import { enqueueWebhook, webhookWorkerDefaults } from 'requeue/webhook';
import { freePort } from '../../src/redis/redis-server.js';
import type { CaseId, ModeId, Options } from './options.js';
import { startReceiver, flakyAnswer, startChild, type Receiver } from './receivers.js';

/**
 * One case of the webhook bench: a fresh child, healthy endpoints beside a
 * misbehaving one or flaky ones, and the latencies, counts and metrics it ends with.
 */

export interface Latency {
  sent: number;
  delivered: number;
  p50: number;
  p99: number;
  max: number;
  duplicates: number;
}

export interface CaseResult {
  mode: ModeId;
  case: CaseId;
  healthy: Latency;
  /** The misbehaving endpoint: deliveries enqueued, requests it saw, most at once. */
  bad?: { sent: number; requests: number; maxInFlight: number };
  flaky?: {
    sent: number;
    delivered: number;
    /** First enqueue → the last flaky event's first 2xx; undefined if not all arrived. */
    allDeliveredMs: number | undefined;
    duplicates: number;
    requests: number;
  };
  /** Enqueue call → its acknowledgement (the intake's 202, or the Redis add), p99. */
  enqueueP99Ms: number;
  enqueueErrors: number;
  /** Case start → the wait ended (all delivered, or the deadline). */
  elapsedMs: number;
  counts: QueueCounts | undefined;
  breakerOpened: Record<string, number>;
  warnings: Record<string, number>;
  /** The service's /metrics: deferrals and breaker transitions (the service only). */
  metrics?: Record<string, number>;
  logFile: string;
}

function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

export interface Job {
  endpoint: { id: string; url: string };
  event: { id: string; type: string; payload: { id: string } };
}

export async function runCase(
  mode: ModeId,
  caseId: CaseId,
  redisUrl: string,
  logDir: string,
  options: Options,
): Promise<CaseResult> {
  const healthy = await startReceiver(() => ({ status: 204 }));
  const bad =
    caseId === '503'
      ? await startReceiver(() => ({ status: 503 }))
      : caseId === '429'
        ? await startReceiver(() => ({
            status: 429,
            headers: { 'retry-after': String(options.retryAfterS) },
          }))
        : caseId === 'hanging'
          ? await startReceiver(() => 'hang')
          : undefined;
  const flaky = caseId === 'flaky' ? await startReceiver(flakyAnswer) : undefined;
  // Nothing listens there: every connection is refused.
  const badUrl =
    caseId === 'refused' ? `http://127.0.0.1:${await freePort()}/hook` : bad && `${bad.base}/hook`;

  const child = await startChild(mode, redisUrl, logDir, `${mode}-${caseId}`);
  const producer =
    mode === 'worker' ? createQueue('webhooks', { connection: redisUrl }) : undefined;
  const submit = async (job: Job): Promise<void> => {
    if (producer) {
      await enqueueWebhook(producer, job);
      return;
    }
    const res = await fetch(`${child.url}/v1/webhooks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(job),
    });
    await res.arrayBuffer();
    if (res.status !== 202) throw new Error(`POST /v1/webhooks answered ${res.status}`);
  };

  const enqueuedAt = new Map<string, number>();
  const ackMs: number[] = [];
  let enqueueErrors = 0;
  const pending: Promise<void>[] = [];
  const fire = (job: Job): void => {
    const at = performance.now();
    enqueuedAt.set(job.event.id, at);
    pending.push(
      submit(job).then(
        () => void ackMs.push(performance.now() - at),
        () => void (enqueueErrors += 1),
      ),
    );
  };
  const event = (id: string) => ({ id, type: 'bench.tick', payload: { id } });

  const total = options.endpoints * options.perEndpoint;
  const interval = options.windowMs / total;
  let badSent = 0;
  let flakySent = 0;
  const start = performance.now();
  try {
    // A burst first: enough to take every slot if nothing bounded one endpoint's share.
    if (badUrl !== undefined)
      for (; badSent < webhookWorkerDefaults.concurrency; badSent += 1)
        fire({ endpoint: { id: 'bad', url: badUrl }, event: event(`b-${badSent}`) });
    for (let i = 0; i < total; i += 1) {
      await sleep(start + i * interval - performance.now());
      const e = i % options.endpoints;
      fire({
        endpoint: { id: `healthy-${e}`, url: `${healthy.base}/h/${e}` },
        event: event(`h-${i}`),
      });
      // One delivery in five more to the bad endpoint, all along.
      if (badUrl !== undefined && i % 5 === 0)
        fire({ endpoint: { id: 'bad', url: badUrl }, event: event(`b-${badSent++}`) });
      // The flaky population, spread over the same window.
      if (flaky)
        for (; flakySent < Math.floor(((i + 1) * options.flaky) / total); flakySent += 1) {
          const f = flakySent % options.flakyEndpoints;
          fire({
            endpoint: { id: `flaky-${f}`, url: `${flaky.base}/f/${f}` },
            event: event(`f-${flakySent}`),
          });
        }
    }
    await Promise.all(pending);
    const deadline = performance.now() + (flaky ? 90_000 : 30_000);
    const done = () =>
      healthy.firstArrival.size >= total && (!flaky || flaky.firstSuccess.size >= flakySent);
    while (!done() && performance.now() < deadline) await sleep(50);
    const elapsedMs = performance.now() - start;

    const counts = await readCounts(redisUrl);
    const metrics = child.url !== undefined ? await readMetrics(child.url) : undefined;

    const latencies: number[] = [];
    for (const [id, at] of enqueuedAt) {
      if (!id.startsWith('h-')) continue;
      const arrived = healthy.firstArrival.get(id);
      if (arrived !== undefined) latencies.push(arrived - at);
    }
    const duplicates = (r: Receiver) => [...r.delivered.values()].filter((n) => n > 1).length;
    let flakyResult: CaseResult['flaky'];
    if (flaky) {
      const successes = [...flaky.firstSuccess.values()];
      flakyResult = {
        sent: flakySent,
        delivered: flaky.firstSuccess.size,
        allDeliveredMs:
          flaky.firstSuccess.size >= flakySent ? Math.max(...successes) - start : undefined,
        duplicates: duplicates(flaky),
        requests: [...flaky.requests.values()].reduce((a, b) => a + b, 0),
      };
    }
    return {
      mode,
      case: caseId,
      healthy: {
        sent: total,
        delivered: latencies.length,
        p50: quantile(latencies, 0.5),
        p99: quantile(latencies, 0.99),
        max: latencies.length > 0 ? Math.max(...latencies) : Number.NaN,
        duplicates: duplicates(healthy),
      },
      ...(badUrl !== undefined
        ? {
            bad: {
              sent: badSent,
              requests: bad ? [...bad.requests.values()].reduce((a, b) => a + b, 0) : 0,
              maxInFlight: bad?.maxInFlight ?? 0,
            },
          }
        : {}),
      ...(flakyResult ? { flaky: flakyResult } : {}),
      enqueueP99Ms: quantile(ackMs, 0.99),
      enqueueErrors,
      elapsedMs,
      counts,
      breakerOpened: Object.fromEntries(child.breakerOpened),
      warnings: Object.fromEntries(child.warnings),
      ...(metrics ? { metrics } : {}),
      logFile: child.logFile,
    };
  } finally {
    await Promise.allSettled(pending);
    // The receivers go first: a hanging request is reset, so the process stops at once.
    await Promise.all([healthy.close(), bad?.close(), flaky?.close()]);
    await producer?.close();
    await child.stop();
  }
}

async function readCounts(redisUrl: string): Promise<QueueCounts | undefined> {
  const queue = createQueue('webhooks', { connection: redisUrl });
  try {
    return await queue.counts();
  } catch {
    return undefined;
  } finally {
    await queue.close();
  }
}

/** The service's deferral and breaker-transition counters, summed per label set. */
async function readMetrics(url: string): Promise<Record<string, number> | undefined> {
  try {
    const text = await (await fetch(`${url}/metrics`)).text();
    const out: Record<string, number> = {};
    for (const line of text.split('\n')) {
      const m =
        /^requeue_(jobs_deferred_total|breaker_transitions_total|jobs_dead_lettered_total|retries_scheduled_total)(\{[^}]*\})?\s+(\S+)/.exec(
          line,
        );
      if (!m) continue;
      const labels = (m[2] ?? '').replace(/queue="[^"]*",?/, '').replace(/[{}"]/g, '');
      const name = `${m[1]}${labels ? `{${labels}}` : ''}`;
      out[name] = (out[name] ?? 0) + Number(m[3]);
    }
    return out;
  } catch {
    return undefined;
  }
}
