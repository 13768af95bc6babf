/**
 * `bench:webhooks`' endpoint-outage figures (issue 24): N registered
 * endpoints, M messages each sent to all of them with `sendMessage` (one
 * every `intervalMs`), a share of the endpoints down (503) from the first
 * send for `outageMs`, then healthy. One webhook worker in this process with
 * its defaults (the 10-step schedule, the per-endpoint breaker, fair
 * dispatch, adaptive concurrency) against one loopback receiver that answers
 * each endpoint's path: healthy ones 200 after `latencyMs`. Measures the
 * healthy endpoints' message → delivery delay (p50/p99/max), delivered and
 * dead for both groups, how many requests the down endpoints got while down
 * (what the breaker saves), and when their deliveries arrived after the
 * outage. The run ends when everything arrived, or once the healthy
 * endpoints' deliveries are in and `afterMs` has passed since the outage
 * ended (what is still pending is then reported with its next try).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { createQueue } from 'requeue';
import {
  createEndpoint,
  createWebhookWorker,
  EndpointRegistry,
  sendMessage,
} from 'requeue/webhook';
import { webhookRetryPolicy } from '../src/policy/webhook-policy.js';

/** What to run. */
export interface OutageOptions {
  endpoints: number;
  messages: number;
  /** Share of the endpoints that are down, 0–1. */
  downShare: number;
  outageMs: number;
  /** Between two messages' sends. */
  intervalMs: number;
  /** A healthy answer's delay. */
  latencyMs: number;
  /** The run stops this long after the outage ended at the latest. */
  afterMs: number;
}

interface Percentiles {
  p50: number;
  p99: number;
  max: number;
}

/** What one run measured; times in ms. */
export interface OutageReport {
  options: OutageOptions;
  setupMs: number;
  elapsedMs: number;
  healthy: {
    endpoints: number;
    sent: number;
    delivered: number;
    duplicates: number;
    dead: number;
    delay: Percentiles;
    /** From the first send to the last healthy delivery. */
    lastMs: number;
  };
  down: {
    endpoints: number;
    sent: number;
    delivered: number;
    duplicates: number;
    dead: number;
    /** Requests the down endpoints got while down, and what a retry-only client would send. */
    requestsWhileDown: number;
    /** Outage end → each delivery. */
    afterOutage: Percentiles;
    /** Endpoints with at least one delivery after the outage. */
    endpointsBack: number;
    /** Outage end → the last endpoint's first delivery. */
    allEndpointsBackMs: number;
    /** Undelivered when the run ended: when their next try was due, from the outage end. */
    pending: number;
    pendingNextTryMs: Percentiles;
  };
  breakerOpened: number;
  deferred: Record<string, number>;
  retriesScheduled: number;
  counts: Record<string, number>;
}

function percentiles(values: number[]): Percentiles {
  if (values.length === 0) return { p50: Number.NaN, p99: Number.NaN, max: Number.NaN };
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
  return { p50: at(0.5), p99: at(0.99), max: sorted[sorted.length - 1]! };
}

/** Endpoint `i` is down when this says so: spread evenly over the ids. */
function isDown(i: number, share: number): boolean {
  return share > 0 && Math.floor((i + 1) * share) > Math.floor(i * share);
}

/** Runs the scenario against a flushed Redis at `redisUrl`; `log` gets progress lines. */
export async function runOutage(
  redisUrl: string,
  admin: Redis,
  o: OutageOptions,
  log: (line: string) => void,
): Promise<OutageReport> {
  await admin.flushall();
  const name = 'webhooks';
  const down = Array.from({ length: o.endpoints }, (_, i) => isDown(i, o.downShare));
  const sentAt = new Map<string, number>(); // message id → when its send began
  const firstOk = new Map<string, number>(); // `${endpoint}|${message}` → arrival of the 2xx
  let duplicatesHealthy = 0;
  let duplicatesDown = 0;
  let requestsWhileDown = 0;
  let okHealthy = 0;
  let okDown = 0;
  let outageStart = Number.POSITIVE_INFINITY;
  let outageEnd = Number.POSITIVE_INFINITY;
  const server = createServer((req, res) => {
    const now = performance.now();
    req.resume();
    const ep = Number((req.url ?? '').slice('/ep-'.length));
    const msg = String(req.headers['webhook-id'] ?? '');
    if (down[ep] && now >= outageStart && now < outageEnd) {
      requestsWhileDown++;
      res.writeHead(503).end();
      return;
    }
    const key = `${ep}|${msg}`;
    if (firstOk.has(key)) {
      if (down[ep]) duplicatesDown++;
      else duplicatesHealthy++;
    } else {
      firstOk.set(key, now);
      if (down[ep]) okDown++;
      else okHealthy++;
    }
    setTimeout(() => res.writeHead(200).end(), o.latencyMs);
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const registry = new EndpointRegistry({ connection: redisUrl });
  const queue = createQueue(name, { connection: redisUrl });
  const setupStart = performance.now();
  for (let i = 0; i < o.endpoints; i += 100)
    await Promise.all(
      Array.from({ length: Math.min(100, o.endpoints - i) }, (_, k) =>
        createEndpoint(
          registry,
          name,
          `ep-${i + k}`,
          { url: `${base}/ep-${i + k}` },
          { allowPrivate: true },
        ),
      ),
    );
  const setupMs = performance.now() - setupStart;
  log(`outage: ${o.endpoints} endpoints registered in ${(setupMs / 1000).toFixed(1)} s`);

  const jobEndpoint = new Map<string, { ep: number; msg: string }>(); // delivery (job) id →
  const nextTry = new Map<string, number>(); // delivery id → epoch ms of its next try
  const dead = new Set<string>();
  const deferred: Record<string, number> = {};
  let breakerOpened = 0;
  let retriesScheduled = 0;
  const deadOfHealthy = () => [...dead].filter((j) => !down[jobEndpoint.get(j)?.ep ?? -1]).length;
  const worker = createWebhookWorker(name, {
    connection: redisUrl,
    allowPrivate: true,
    registry,
    logger: { level: 'silent' },
  });
  worker.on('retry:scheduled', (e) => {
    retriesScheduled++;
    nextTry.set(e.jobId, e.retryAt);
  });
  worker.on('job:deferred', (e) => {
    deferred[e.reason] = (deferred[e.reason] ?? 0) + 1;
    nextTry.set(e.jobId, e.untilMs);
  });
  worker.on('job:dead-lettered', (e) => dead.add(e.jobId));
  worker.on('breaker:opened', () => breakerOpened++);
  await worker.waitUntilReady();

  const total = o.endpoints * o.messages;
  const downCount = down.filter(Boolean).length;
  const healthyTotal = (o.endpoints - downCount) * o.messages;
  const t0 = performance.now();
  outageStart = t0;
  outageEnd = t0 + o.outageMs;
  for (let m = 0; m < o.messages; m++) {
    const due = t0 + m * o.intervalMs;
    if (performance.now() < due) await new Promise((r) => setTimeout(r, due - performance.now()));
    const id = `msg_${m}`;
    sentAt.set(id, performance.now());
    const sent = await sendMessage(
      queue,
      { type: 'bench.outage', payload: { m }, id },
      { registry },
    );
    for (const d of sent.endpoints)
      jobEndpoint.set(d.deliveryId, { ep: Number(d.endpointId.slice(3)), msg: id });
    log(`outage: message ${m + 1}/${o.messages} to ${sent.endpoints.length} endpoints`);
  }

  let lastLog = performance.now();
  for (;;) {
    await new Promise((r) => setTimeout(r, 250));
    const now = performance.now();
    const settled = okHealthy + okDown + dead.size >= total;
    if (settled && now >= outageEnd) break;
    // The cap is for the down endpoints' retries: the healthy ones are always awaited.
    if (okHealthy + deadOfHealthy() >= healthyTotal && now > outageEnd + o.afterMs) break;
    if (now - lastLog > 15_000) {
      lastLog = now;
      log(
        `outage: ${((now - t0) / 1000).toFixed(0)} s: healthy ${okHealthy}/${healthyTotal}, down delivered ${okDown}/${total - healthyTotal}, dead ${dead.size}, 503s ${requestsWhileDown}, breaker opens ${breakerOpened}`,
      );
    }
  }
  const elapsedMs = performance.now() - t0;
  const counts = (await queue.counts()) as unknown as Record<string, number>;
  await worker.close({ timeoutMs: 10_000 });
  await queue.close();
  await registry.close();
  await new Promise((resolve) => server.close(resolve));
  server.closeAllConnections();

  const healthyDelay: number[] = [];
  const downAfter: number[] = [];
  const firstBack = new Map<number, number>();
  let lastHealthy = 0;
  for (const [key, at] of firstOk) {
    const [ep, msg] = key.split('|') as [string, string];
    const i = Number(ep);
    if (down[i]) {
      downAfter.push(at - outageEnd);
      firstBack.set(i, Math.min(firstBack.get(i) ?? Number.POSITIVE_INFINITY, at - outageEnd));
    } else {
      healthyDelay.push(at - sentAt.get(msg)!);
      lastHealthy = Math.max(lastHealthy, at - t0);
    }
  }
  // Still pending: their next try, from the outage end (epoch → performance clock).
  const epochToPerf = performance.now() - Date.now();
  const pendingNext: number[] = [];
  for (const [job, { ep, msg }] of jobEndpoint) {
    if (!down[ep] || dead.has(job) || firstOk.has(`${ep}|${msg}`)) continue;
    const t = nextTry.get(job);
    if (t !== undefined) pendingNext.push(t + epochToPerf - outageEnd);
  }
  const deadOf = (wantDown: boolean) =>
    [...dead].filter((j) => down[jobEndpoint.get(j)?.ep ?? -1] === wantDown).length;
  const downDelivered = downAfter.length;
  return {
    options: o,
    setupMs,
    elapsedMs,
    healthy: {
      endpoints: o.endpoints - downCount,
      sent: healthyTotal,
      delivered: healthyDelay.length,
      duplicates: duplicatesHealthy,
      dead: deadOf(false),
      delay: percentiles(healthyDelay),
      lastMs: lastHealthy,
    },
    down: {
      endpoints: downCount,
      sent: total - healthyTotal,
      delivered: downDelivered,
      duplicates: duplicatesDown,
      dead: deadOf(true),
      requestsWhileDown,
      afterOutage: percentiles(downAfter),
      endpointsBack: firstBack.size,
      allEndpointsBackMs: firstBack.size > 0 ? Math.max(...firstBack.values()) : Number.NaN,
      pending: total - healthyTotal - downDelivered - deadOf(true),
      pendingNextTryMs: percentiles(pendingNext),
    },
    breakerOpened,
    deferred,
    retriesScheduled,
    counts,
  };
}

const s = (ms: number) =>
  Number.isFinite(ms) ? `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s` : '—';
const n = (v: number) => v.toLocaleString('en-US');

/** The report as a Markdown section body; `context` says where and how it ran. */
export function renderOutage(r: OutageReport, context: string): string {
  const o = r.options;
  const h = r.healthy;
  const d = r.down;
  return [
    `### ${n(o.endpoints)} endpoints × ${o.messages} messages, ${Math.round(o.downShare * 100)} % of the endpoints down for ${s(o.outageMs)} (issue 24)`,
    '',
    context,
    '',
    `Load: ${o.messages} messages sent with \`sendMessage\` to all ${n(o.endpoints)} registered endpoints, one every ${s(o.intervalMs)}; healthy endpoints answer 200 after ${o.latencyMs} ms; ${d.endpoints > 0 ? `${n(d.endpoints)} endpoints (spread evenly, 1 in ${Math.round(1 / o.downShare)}) answer 503 from the first send for ${s(o.outageMs)}, then 200` : 'none is down (the baseline)'}. Delay: the \`sendMessage\` call → the receiver gets the request that is answered 200. Registering the endpoints took ${s(r.setupMs)}; the run took ${s(r.elapsedMs)} from the first send.`,
    '',
    '| endpoints | count | deliveries | delivered | twice | dead | delay p50 | p99 | max | last delivery |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    `| healthy | ${n(h.endpoints)} | ${n(h.sent)} | **${n(h.delivered)}** | ${h.duplicates} | **${h.dead}** | **${s(h.delay.p50)}** | **${s(h.delay.p99)}** | ${s(h.delay.max)} | ${s(h.lastMs)} after the first send |`,
    `| down for ${s(o.outageMs)} | ${n(d.endpoints)} | ${n(d.sent)} | **${n(d.delivered)}** | ${d.duplicates} | **${d.dead}** | after the outage: ${s(d.afterOutage.p50)} | ${s(d.afterOutage.p99)} | ${s(d.afterOutage.max)} | ${n(d.endpointsBack)} of ${n(d.endpoints)} endpoints had one within ${s(d.allEndpointsBackMs)} of the outage's end |`,
    '',
    `- Requests to the down endpoints while down: **${n(d.requestsWhileDown)}** for ${n(d.sent)} deliveries (${(d.requestsWhileDown / Math.max(1, d.sent)).toFixed(2)} per delivery; the schedule alone, without a breaker, makes ${stepsWithin(o.outageMs)} attempts in the first ${s(o.outageMs)} of a delivery: ${n(d.sent * stepsWithin(o.outageMs))} for these if all were sent at the outage's start). Breaker opens: ${n(r.breakerOpened)}; retries scheduled: ${n(r.retriesScheduled)}; deferrals: ${
      Object.entries(r.deferred)
        .map(([k, v]) => `${k} ${n(v)}`)
        .join(', ') || 'none'
    }.`,
    `- Down endpoints' deliveries still pending when the run ended: ${n(d.pending)}${d.pending > 0 ? `, next try due p50 ${s(d.pendingNextTryMs.p50)} / max ${s(d.pendingNextTryMs.max)} after the outage's end` : ''}. Queue at the end: ${Object.entries(
      r.counts,
    )
      .map(([k, v]) => `${k} ${n(v)}`)
      .join(', ')}.`,
  ].join('\n');
}

/** Attempts the default schedule makes within `ms` of the first (first included). */
function stepsWithin(ms: number): number {
  const steps = webhookRetryPolicy.scheduleMs ?? [];
  let at = 0;
  let count = 1;
  for (const step of steps) {
    at += step;
    if (at >= ms) break;
    count++;
  }
  return count;
}
