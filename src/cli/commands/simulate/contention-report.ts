import type { ContentionParams, ContentionResult } from '../../../simulate/contention.js';
import { formatTable } from '../../table.js';
import { formatMs } from '../plan.js';
import { policyParams } from './policy-flags.js';
import { round } from './scenario.js';

/** `--scenario contention --json`: the parameters, then calls and time per strategy. */
export function contentionJson(params: ContentionParams, results: ContentionResult[]): string {
  const { clients, trials, seed, netMeanMs, netSdMs, policy } = params;
  return `${JSON.stringify(
    {
      scenario: 'contention',
      params: { clients, trials, seed, netMeanMs, netSdMs, ...policyParams(policy) },
      strategies: results.map((r) => ({
        strategy: r.strategy,
        calls: round(r.calls, 2),
        timeMs: round(r.timeMs, 3),
      })),
    },
    null,
    2,
  )}\n`;
}

/** `--scenario contention`: one row per strategy, then which did least work and finished first. */
export function contentionTable(params: ContentionParams, results: ContentionResult[]): string {
  const { clients, trials, seed, netMeanMs, netSdMs, policy } = params;
  const lines = [
    `contention: ${clients} clients race to write one row, ${trials} trials (seed ${seed}); ` +
      `each message |normal(${netMeanMs}ms, ${netSdMs}ms)|; backoff baseMs=${policy.baseMs} ` +
      `capMs=${policy.capMs} factor=${policy.factor}; means per trial`,
  ];
  const rows = results.map((r) => [
    r.strategy,
    r.calls.toFixed(1),
    (r.calls / clients).toFixed(2),
    formatMs(r.timeMs),
  ]);
  lines.push(formatTable(['strategy', 'calls', 'per client', 'time'], rows).trimEnd());
  if (results.length > 1) {
    const leastWork = results.reduce((a, b) => (b.calls < a.calls ? b : a));
    const fastest = results.reduce((a, b) => (b.timeMs < a.timeMs ? b : a));
    lines.push(
      `least work: ${leastWork.strategy} (${leastWork.calls.toFixed(1)} calls); ` +
        `first done: ${fastest.strategy} (${formatMs(fastest.timeMs)})`,
    );
  }
  return `${lines.join('\n')}\n`;
}
