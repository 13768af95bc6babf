import type { TopLevelSpec } from 'vega-lite';
import type { ContentionParams, ContentionResult } from '../simulate/contention.js';
import type { OutageParams, OutageResult } from '../simulate/outage.js';
import { plotPackages, requireOptional } from '../util/optional-deps.js';

/**
 * The plots of `requeue simulate --svg`, described in Vega-Lite and rendered
 * headless by Vega's `toSVG` (no browser, no canvas). Vega is loaded only
 * when a plot is asked for.
 */

const colors = {
  ok: '#2a9d4b',
  timeouts: '#d1495b',
  refused: '#edae49',
  concurrency: '#30638e',
};

async function render(spec: TopLevelSpec): Promise<string> {
  requireOptional(plotPackages, '--svg');
  const [vega, vegaLite] = await Promise.all([import('vega'), import('vega-lite')]);
  const view = new vega.View(vega.parse(vegaLite.compile(spec).spec), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/** Calls and time to the last success, one bar per strategy. */
export function contentionSvg(
  params: ContentionParams,
  results: ContentionResult[],
): Promise<string> {
  const values = results.map((r) => ({
    strategy: r.strategy,
    calls: Math.round(r.calls * 10) / 10,
    seconds: Math.round(r.timeMs) / 1000,
  }));
  const bar = (field: 'calls' | 'seconds', title: string, color: string) => ({
    width: 300,
    height: { step: 22 },
    mark: { type: 'bar' as const, color },
    encoding: {
      y: {
        field: 'strategy',
        type: 'nominal' as const,
        sort: { field: 'calls', order: 'ascending' as const },
        title: null,
      },
      x: { field, type: 'quantitative' as const, title },
      tooltip: [{ field: 'strategy' }, { field }],
    },
  });
  const spec: TopLevelSpec = {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: {
      text: `Contention: ${params.clients} clients write one row (mean of ${params.trials} trials)`,
      subtitle: `backoff base ${params.policy.baseMs} ms, cap ${params.policy.capMs} ms; seed ${params.seed}. Fewer calls = less work for the database.`,
    },
    data: { values },
    hconcat: [
      bar('calls', 'writes the row received (calls)', colors.concurrency),
      bar('seconds', 'time until the last client succeeded (s)', colors.refused),
    ],
    config: { font: 'sans-serif' },
  };
  return render(spec);
}

/**
 * Per strategy, one row: requests per second (ok, timeouts, refused by the
 * breaker) and the server's concurrency (symlog), the outage shaded.
 */
export function outageSvg(params: OutageParams, results: OutageResult[]): Promise<string> {
  const load: { strategy: string; t: number; series: string; value: number }[] = [];
  const concurrency: { strategy: string; t: number; value: number }[] = [];
  const withBreaker = params.breaker !== undefined;
  for (const r of results) {
    const label = `${r.protected ? `${r.strategy}+protect` : r.strategy}: ${r.recovered ? `recovered ${(r.recoveryMs ?? 0) / 1000}s after resume` : 'never recovered'}`;
    for (const s of r.perSecond) {
      load.push({ strategy: label, t: s.t, series: 'ok', value: s.ok });
      load.push({ strategy: label, t: s.t, series: 'timeouts', value: s.timeouts });
      if (withBreaker) load.push({ strategy: label, t: s.t, series: 'refused', value: s.errors });
      concurrency.push({ strategy: label, t: s.t, value: s.concurrency });
    }
  }
  const order = results.map(
    (r) =>
      `${r.protected ? `${r.strategy}+protect` : r.strategy}: ${r.recovered ? `recovered ${(r.recoveryMs ?? 0) / 1000}s after resume` : 'never recovered'}`,
  );
  const start = params.stopAtMs / 1000;
  const end = (params.stopAtMs + params.stopForMs) / 1000;
  const outage = {
    mark: { type: 'rect' as const, color: '#bbbbbb', opacity: 0.35 },
    encoding: {
      x: { datum: start, type: 'quantitative' as const },
      x2: { datum: end },
    },
  };
  const series = withBreaker ? ['ok', 'timeouts', 'refused'] : ['ok', 'timeouts'];
  const cell = { width: 360, height: 70 };
  const x = { field: 't', type: 'quantitative' as const, title: 'time (s)' };
  const spec: TopLevelSpec = {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: {
      text: `Outage: ${params.clients} clients, server stopped ${start}–${end} s (shaded)`,
      subtitle:
        `backoff base ${params.policy.baseMs} ms ×${params.policy.factor}, timeout ${params.timeoutMs} ms; ` +
        `server ${params.server.minDelayMs} ms up to ${params.server.concurrencyLimit} in flight, backlog ${params.server.backlog}` +
        (params.breaker ? '; with breaker' : '') +
        (params.budget ? `; with ${params.budget.kind} budget` : ''),
    },
    hconcat: [
      {
        data: { values: load },
        facet: { row: { field: 'strategy', type: 'nominal', sort: order, title: null } },
        spec: {
          ...cell,
          layer: [
            { ...outage, transform: [{ filter: "datum.t === 0 && datum.series === 'ok'" }] },
            {
              mark: { type: 'line', strokeWidth: 1.2 },
              encoding: {
                x,
                y: { field: 'value', type: 'quantitative', title: 'requests/s' },
                color: {
                  field: 'series',
                  type: 'nominal',
                  scale: {
                    domain: series,
                    range: series.map((s) => colors[s as keyof typeof colors]),
                  },
                  title: null,
                },
              },
            },
          ],
        },
      },
      {
        data: { values: concurrency },
        facet: { row: { field: 'strategy', type: 'nominal', sort: order, title: null } },
        spec: {
          ...cell,
          layer: [
            { ...outage, transform: [{ filter: 'datum.t === 0' }] },
            {
              mark: { type: 'area', color: colors.concurrency, opacity: 0.7, line: true },
              // One series per cell: nothing to stack (and symlog cannot be stacked).

              encoding: {
                x,
                y: {
                  field: 'value',
                  type: 'quantitative',
                  title: 'concurrency',
                  scale: { type: 'symlog' },
                  stack: null,
                },
              },
            },
            {
              mark: { type: 'rule', strokeDash: [4, 3], color: '#555' },
              encoding: { y: { datum: params.server.concurrencyLimit } },
              transform: [{ filter: 'datum.t === 0' }],
            },
          ],
        },
      },
    ],
    config: { font: 'sans-serif', facet: { spacing: 8 } },
  };
  return render(spec);
}
