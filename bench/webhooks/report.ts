// The built package, as users run it (`npm run build` first; the bench script does).
import { webhookWorkerDefaults, type webhookBreakerDefaults } from 'requeue/webhook';
import type { Machine } from '../support/machine.js';
import {
  caseLabels,
  modeLabels,
  p99SlackMs,
  flakyGoalMs,
  oldServiceRate,
  type CaseId,
  type ModeId,
  type Options,
} from './options.js';
import type { CaseResult } from './run-case.js';

/**
 * The webhook bench's report: the goals met or missed, the table, and its
 * section of bench/RESULTS.md.
 */

export interface Report {
  startedAt: string;
  durationS: number;
  command: string;
  revision: string;
  machine: Machine;
  loadAfter: number;
  options: Options;
  defaults: {
    worker: typeof webhookWorkerDefaults;
    breaker: typeof webhookBreakerDefaults;
  };
  results: CaseResult[];
  goals: { mode: ModeId; case: CaseId; goal: string; met: boolean; detail: string }[];
}

export const ms = (v: number | undefined): string =>
  v === undefined || !Number.isFinite(v)
    ? '—'
    : v >= 10_000
      ? `${(v / 1000).toFixed(1)} s`
      : `${Math.round(v)} ms`;

function baselineOf(results: CaseResult[], mode: ModeId): CaseResult | undefined {
  return results.find((r) => r.mode === mode && r.case === 'baseline');
}

export function evaluate(results: CaseResult[]): Report['goals'] {
  const goals: Report['goals'] = [];
  for (const r of results) {
    const base = baselineOf(results, r.mode);
    if (r.case !== 'baseline' && base) {
      const allThere = r.healthy.delivered === r.healthy.sent;
      const over = r.healthy.p99 - base.healthy.p99;
      goals.push({
        mode: r.mode,
        case: r.case,
        goal: `healthy p99 ≤ baseline + ${p99SlackMs / 1000} s`,
        met: allThere && over <= p99SlackMs,
        detail: allThere
          ? `p99 ${ms(r.healthy.p99)} vs baseline ${ms(base.healthy.p99)} (${over >= 0 ? '+' : ''}${ms(over)})` +
            (over > p99SlackMs && r.enqueueP99Ms - base.enqueueP99Ms > over / 2
              ? `; most of it before the job was queued: the enqueue's acknowledgement alone took p99 ${ms(r.enqueueP99Ms)} (baseline ${ms(base.enqueueP99Ms)})`
              : '')
          : `${r.healthy.sent - r.healthy.delivered} of ${r.healthy.sent} healthy deliveries never arrived`,
      });
    }
    if (r.flaky) {
      const f = r.flaky;
      const met =
        f.allDeliveredMs !== undefined && f.allDeliveredMs <= flakyGoalMs && f.duplicates === 0;
      goals.push({
        mode: r.mode,
        case: r.case,
        goal: `all flaky deliveries within ${flakyGoalMs / 1000} s, each once`,
        met,
        detail:
          f.allDeliveredMs !== undefined
            ? `${f.delivered}/${f.sent} in ${ms(f.allDeliveredMs)}, ${f.duplicates} delivered twice (${(
                f.delivered /
                (f.allDeliveredMs / 1000) /
                oldServiceRate
              ).toFixed(0)}× the old service's rate)`
            : `${f.delivered}/${f.sent} after ${ms(r.elapsedMs)}, ${f.duplicates} delivered twice`,
      });
    }
  }
  return goals;
}

export function tableRows(report: Report): { header: string[]; rows: string[][] } {
  const header = [
    'process',
    'case',
    'healthy',
    'p50',
    'p99',
    'p99 − base',
    'max',
    'bad endpoint: sent / reqs / max at once',
    'flaky: delivered, all in, twice',
    'breaker opens',
    'dead',
    'goal',
  ];
  const rows = report.results.map((r) => {
    const base = baselineOf(report.results, r.mode);
    const goals = report.goals.filter((g) => g.mode === r.mode && g.case === r.case);
    const opens = Object.entries(r.breakerOpened)
      .map(([k, n]) => `${k}×${n}`)
      .join(' ');
    return [
      modeLabels[r.mode],
      caseLabels[r.case],
      `${r.healthy.delivered}/${r.healthy.sent}${r.healthy.duplicates ? ` (${r.healthy.duplicates} twice)` : ''}`,
      ms(r.healthy.p50),
      ms(r.healthy.p99),
      r.case === 'baseline' || !base ? '' : ms(r.healthy.p99 - base.healthy.p99),
      ms(r.healthy.max),
      r.bad
        ? `${r.bad.sent} / ${r.case === 'refused' ? '—' : r.bad.requests} / ${r.case === 'refused' ? '—' : r.bad.maxInFlight}`
        : '',
      r.flaky
        ? `${r.flaky.delivered}/${r.flaky.sent}, ${ms(r.flaky.allDeliveredMs)}, ${r.flaky.duplicates}`
        : '',
      opens || '0',
      r.counts ? String(r.counts.dead) : '?',
      goals.length === 0 ? '(reference)' : goals.every((g) => g.met) ? 'met' : 'MISSED',
    ];
  });
  return { header, rows };
}

export function renderMarkdown(report: Report): string {
  const { header, rows } = tableRows(report);
  const o = report.options;
  const md = (cells: string[]) => `| ${cells.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`;
  const goalLines = report.goals.map(
    (g) =>
      `- ${g.met ? 'met' : '**MISSED**'} — ${modeLabels[g.mode]}, ${caseLabels[g.case]}: ${g.goal}; ${g.detail}`,
  );
  const notes = report.results.map((r) => {
    const parts: string[] = [];
    if (r.enqueueErrors > 0) parts.push(`${r.enqueueErrors} enqueue errors`);
    if (Object.keys(r.warnings).length > 0)
      parts.push(
        `warnings ${Object.entries(r.warnings)
          .map(([m, n]) => `"${m}" ×${n}`)
          .join(', ')}`,
      );
    if (r.metrics && Object.keys(r.metrics).length > 0)
      parts.push(
        `/metrics ${Object.entries(r.metrics)
          .map(([m, n]) => `${m} ${n}`)
          .join(', ')}`,
      );
    return `- ${modeLabels[r.mode]}, ${caseLabels[r.case]}: enqueue ack p99 ${ms(r.enqueueP99Ms)} (${r.mode === 'service' ? "the intake's 202" : 'the Redis add'})${parts.length > 0 ? `; ${parts.join('; ')}` : ''}`;
  });
  const m = report.machine;
  return `## Webhook isolation: healthy endpoints' latency next to a bad one, standalone worker and service

Written by \`bench/webhooks.bench.ts\` on ${report.startedAt} (the run took ${Math.round(report.durationS)} s).

- Command: \`${report.command}\`; code at ${report.revision}
- Machine: \`${m.uname}\`
- CPU: ${m.cpuModel}, ${m.cores} cores; 1-minute load average ${m.loadAverage.toFixed(2)} at the start, ${report.loadAfter.toFixed(2)} at the end (the process under test, Redis, the receivers and the producer share the cores)
- Node ${m.node}; redis-server ${m.redis} (a private redis-server started for the run, appendonly no, flushed between cases)
- Each case: a fresh child process with its default settings — \`node dist/workers/webhook/main.js\` (webhooks enqueued with \`enqueueWebhook\` from this process) or \`node dist/workers/service/main.js\` (webhooks posted to \`POST /v1/webhooks\`) — with only \`REDIS_URL\` and \`WEBHOOK_ALLOW_PRIVATE=true\` set. Defaults in effect: concurrency ${report.defaults.worker.concurrency}, a bulkhead of a quarter of it per endpoint, attempt timeout ${report.defaults.worker.timeoutMs / 1000} s, lock ${report.defaults.worker.lockDurationMs / 1000} s / stalled check ${report.defaults.worker.stalledIntervalMs / 1000} s, retry policy full-jitter 1–30 s × 5 attempts, breaker \`${JSON.stringify(report.defaults.breaker)}\`.
- Load: ${o.endpoints} healthy endpoints (answer 204 at once) × ${o.perEndpoint} deliveries, enqueued evenly over ${o.windowMs / 1000} s; the bad endpoint gets a burst of ${webhookWorkerDefaults.concurrency} deliveries first (enough to take every slot) and then one for every five healthy ones. 503: always 503, no Retry-After; 429: always 429 with \`Retry-After: ${o.retryAfterS}\`; refused: a loopback port nothing listens on; hanging: accepts, reads the body, never answers. Flaky: ${o.flaky} deliveries to ${o.flakyEndpoints} receivers spread over the same window, 40 % succeed at once, the rest fail 1–3 times first, alternately 503 and 429 with \`Retry-After: 1\`.
- Latency: the enqueue call (before the intake's POST or the Redis add) → the healthy receiver gets the request, same clock. A case ends when every healthy (and flaky) delivery arrived, or 30 s (flaky: 90 s) after the last enqueue.

${md(header)}
${md(header.map(() => '---'))}
${rows.map(md).join('\n')}

"bad endpoint": deliveries enqueued to it / requests it received (with retries) / most requests it had at once — a hanging endpoint's "at once" is the slots it holds. "breaker opens": \`breaker opened\` log lines per endpoint key. "dead": the DLQ when the case ended.

Goals (issue 13): healthy endpoints' p99 within ${p99SlackMs / 1000} s of the same process's baseline in every case; flaky receivers deliver everything (issue 13's "done when": 1,000 within ${flakyGoalMs / 1000} s, each once; the old service delivered 265 of 2,800 in 240 s, ${oldServiceRate.toFixed(1)}/s).

${goalLines.join('\n')}

${notes.length > 0 ? `Per case:\n\n${notes.join('\n')}\n` : ''}`;
}
