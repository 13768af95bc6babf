import {
  recoveryOkFraction,
  recoveryWindowS,
  serverRecoveryWindowS,
  type OutageParams,
  type OutageResult,
} from '../../../simulate/outage.js';
import { formatTable } from '../../table.js';
import { formatMs } from '../plan.js';
import { policyParams } from './policy-flags.js';
import { sum } from './scenario.js';

/** The outage's parameters as given, the server's flattened, breaker and budget `null` when off. */
function outageParamsJson(params: OutageParams) {
  const { clients, seed, meanGapMs, timeoutMs, stopAtMs, stopForMs, durationMs, server } = params;
  return {
    clients,
    client: params.client ?? 'requeue',
    seed,
    meanGapMs,
    timeoutMs,
    stopAtMs,
    stopForMs,
    durationMs,
    ...server,
    ...policyParams(params.policy),
    breaker: params.breaker ?? null,
    budget: params.budget ?? null,
  };
}

/** What `--protect` ran, for the parameters. */
function protectJson(protectedRun: OutageParams) {
  const { limit, concurrency, retryShare } = protectedRun.protect!;
  const { breaker, budget } = protectedRun;
  return { breaker, budget, limit, concurrency, retryShare };
}

/**
 * `--scenario outage --json`: the parameters, then each strategy's verdict
 * and seconds; with `--protect` (`protectedRun` its parameters) each row
 * says whether it was protected, and the parameters say how.
 */
export function outageJson(
  params: OutageParams,
  results: OutageResult[],
  protectedRun?: OutageParams | undefined,
): string {
  return `${JSON.stringify(
    {
      scenario: 'outage',
      params: protectedRun
        ? { ...outageParamsJson(params), protect: protectJson(protectedRun) }
        : outageParamsJson(params),
      strategies: results.map((r) => ({
        strategy: r.strategy,
        ...(protectedRun ? { protected: r.protected } : {}),
        recovered: r.recovered,
        recoveryMs: r.recoveryMs,
        serverRecovered: r.serverRecovered,
        serverRecoveryMs: r.serverRecoveryMs,
        peakConcurrency: r.peakConcurrency,
        perSecond: r.perSecond,
      })),
    },
    null,
    2,
  )}\n`;
}

/** A row's name: its strategy, `+protect` when protected. */
const rowName = (r: OutageResult): string => (r.protected ? `${r.strategy}+protect` : r.strategy);

/** `--scenario outage`: the verdicts, then a timeline 10 s a row. */
export function outageTable(
  params: OutageParams,
  results: OutageResult[],
  protectedRun?: OutageParams | undefined,
): string {
  const { clients, seed, meanGapMs, timeoutMs, stopAtMs, stopForMs, durationMs, server, policy } =
    params;
  const extras = [
    params.breaker ? `breaker ${JSON.stringify(params.breaker)}` : '',
    params.budget ? `budget ${JSON.stringify(params.budget)}` : '',
  ].filter(Boolean);
  const lines = [
    `outage: ${clients} clients, a request every ${formatMs(meanGapMs)} on average each, timeout ${formatMs(timeoutMs)} (seed ${seed}); ` +
      `server ${server.minDelayMs}ms up to ${server.concurrencyLimit} in flight, ×${server.latencyFactor} per ${server.latencyK} more, backlog ${server.backlog}; ` +
      `stopped at ${formatMs(stopAtMs)} for ${formatMs(stopForMs)}, run ${formatMs(durationMs)}; ` +
      `backoff baseMs=${policy.baseMs} capMs=${policy.capMs} factor=${policy.factor} jitter=${policy.jitter}`,
  ];
  if (params.client === 'seed004')
    lines.push(
      "client seed004: client.go's rule, the backoff chain starting from the think gap before the failed request, jitter absolute (× 1 s)",
    );
  if (extras.length > 0) lines.push(`with ${extras.join(' and ')}`);
  if (protectedRun) {
    const { limit, retryShare } = protectedRun.protect!;
    lines.push(
      `+protect: breaker ${JSON.stringify(protectedRun.breaker)}, budget ${JSON.stringify(protectedRun.budget)}, ` +
        `concurrency limit (gradient) from ${limit.initial} (${limit.floor}–${protectedRun.protect!.concurrency}, tolerance ${limit.tolerance}), retries first up to ${retryShare * 100}% of starts`,
    );
  }
  const rows = results.map((r) => {
    const last = r.perSecond.slice(-recoveryWindowS);
    return [
      rowName(r),
      r.recovered ? 'yes' : 'no',
      r.recoveryMs === null ? '-' : formatMs(r.recoveryMs),
      String(r.peakConcurrency),
      r.baselineOkPerSecond.toFixed(1),
      (sum(last.map((s) => s.ok)) / Math.max(1, last.length)).toFixed(1),
      String(sum(r.perSecond.map((s) => s.timeouts))),
      String(sum(r.perSecond.map((s) => s.errors))),
      String(r.calls),
      r.serverRecoveryMs === null ? '-' : formatMs(r.serverRecoveryMs),
    ];
  });
  lines.push(
    formatTable(
      [
        'strategy',
        'recovered',
        'after',
        'peak conc',
        'ok/s before',
        `ok/s last ${recoveryWindowS}s`,
        'timeouts',
        'refused',
        'calls',
        'server back',
      ],
      rows,
    ).trimEnd(),
  );
  lines.push(
    `recovered: a ${recoveryWindowS}s window with concurrency ≤ ${server.concurrencyLimit} every second and ok/s ≥ ${recoveryOkFraction * 100}% of before over the window (a second's surplus not counted); ` +
      `"after" counts from the resume; "refused": requests the breaker turned away; ` +
      `"server back": concurrency ≤ ${server.concurrencyLimit} (latency at its ${server.minDelayMs}ms floor) for ${serverRecoveryWindowS}s in a row, from the resume`,
  );
  lines.push('', ...timeline(params, results));
  return `${lines.join('\n')}\n`;
}

/** Mean ok/s and the highest concurrency, 10 s a row, strategy by strategy. */
function timeline(params: OutageParams, results: OutageResult[]): string[] {
  const step = 10;
  const rows: string[][] = [];
  const seconds = results[0]?.perSecond.length ?? 0;
  for (let t = 0; t < seconds; t += step) {
    const row = [String(t)];
    for (const r of results) {
      const block = r.perSecond.slice(t, t + step);
      const ok = sum(block.map((s) => s.ok)) / block.length;
      const conc = Math.max(...block.map((s) => s.concurrency));
      row.push(`${ok.toFixed(0)} / ${conc}`);
    }
    rows.push(row);
  }
  const { stopAtMs, stopForMs } = params;
  return [
    `timeline: ok/s (mean over ${step}s) / peak concurrency; the server is down from ${stopAtMs / 1000}s to ${(stopAtMs + stopForMs) / 1000}s`,
    formatTable(['t (s)', ...results.map(rowName)], rows).trimEnd(),
  ];
}
