import type { FairnessParams, FairnessResult } from '../../../simulate/fairness.js';
import type { Summary } from '../../../util/stats.js';
import { formatTable } from '../../table.js';
import { formatMs } from '../plan.js';
import { round } from './scenario.js';

interface FairnessRun {
  results: FairnessResult[];
  alone: Summary;
}

const nullableRound = (n: number | null): number | null => (n === null ? null : round(n, 3));

const ms = (s: Summary) => ({
  p50Ms: round(s.p50, 3),
  p99Ms: round(s.p99, 3),
  maxMs: round(s.max, 3),
});

/** The small keys' p99 in `r` over their p99 alone; null when alone is 0 and `r` is not. */
function ratio(r: FairnessResult, alone: Summary): number | null {
  if (alone.p99 > 0) return r.small.p99 / alone.p99;
  return r.small.p99 === 0 ? 1 : null;
}

/**
 * `--scenario fairness --json`: the parameters, the small keys' delays
 * without the backlog (the reference), then per dispatch order the small
 * keys' delays together, their p99 against the reference, and every key's.
 */
export function fairnessJson(params: FairnessParams, { results, alone }: FairnessRun): string {
  return `${JSON.stringify(
    {
      scenario: 'fairness',
      params,
      smallAlone: ms(alone),
      dispatches: results.map((r) => ({
        dispatch: r.dispatch,
        small: ms(r.small),
        smallP99Ratio: nullableRound(ratio(r, alone)),
        makespanMs: round(r.makespanMs, 3),
        keys: r.keys.map((k) => ({ key: k.key, jobs: k.jobs, ...ms(k) })),
      })),
    },
    null,
    2,
  )}\n`;
}

/** At most this many keys in the table's per-key part (the JSON has all). */
const keysShown = 12;

/** `--scenario fairness`: one row per dispatch order, then each key's p99. */
export function fairnessTable(params: FairnessParams, { results, alone }: FairnessRun): string {
  const { seed, concurrency, bigJobs, smallKeys, smallJobs, smallAtMs, serviceMs } = params;
  const lines = [
    `fairness: ${concurrency} slots; one key holds ${bigJobs} jobs at 0s, ${smallKeys} keys × ${smallJobs} jobs arrive at ${formatMs(smallAtMs)}; ` +
      `each job ${formatMs(serviceMs)} on average (seed ${seed}); delays are enqueue → start`,
  ];
  const rows = results.map((r) => [
    r.dispatch,
    formatMs(r.small.p50),
    formatMs(r.small.p99),
    `${ratio(r, alone)?.toFixed(2) ?? '∞'}×`,
    formatMs(r.keys[0]!.p50),
    formatMs(r.keys[0]!.p99),
    formatMs(r.makespanMs),
  ]);
  lines.push(
    formatTable(
      ['dispatch', 'small p50', 'small p99', 'p99 × alone', 'big p50', 'big p99', 'all done'],
      rows,
    ).trimEnd(),
  );
  lines.push(
    `alone (no backlog): small p50 ${formatMs(alone.p50)}, p99 ${formatMs(alone.p99)}; ` +
      'fifo: one list in arrival order; fair: start-time fair queuing across keys, one unit per job',
  );
  const shown = results[0]?.keys.slice(0, keysShown) ?? [];
  const perKey = shown.map((k, i) => [
    k.key,
    String(k.jobs),
    ...results.map((r) => `${formatMs(r.keys[i]!.p50)} / ${formatMs(r.keys[i]!.p99)}`),
  ]);
  lines.push(
    '',
    `per key: p50 / p99${shown.length < (results[0]?.keys.length ?? 0) ? ` (first ${keysShown}; --json has all)` : ''}`,
  );
  lines.push(formatTable(['key', 'jobs', ...results.map((r) => r.dispatch)], perKey).trimEnd());
  return `${lines.join('\n')}\n`;
}
