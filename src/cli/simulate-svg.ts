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
 * Ticks for a symlog axis holding values up to `max`: 0, then 1-2-5 steps
 * per decade while few decades are shown, 1-3 or powers of ten beyond, up to
 * the first tick at or above `max` (the axis's top).
 */
export function symlogTicks(max: number): number[] {
  const decades = Math.max(1, Math.ceil(Math.log10(Math.max(1, max))));
  const steps = decades <= 2 ? [1, 2, 5] : decades <= 3 ? [1, 3] : [1];
  // Below 10 a symlog axis has no room for a tick apart from 0 once it spans decades.
  const ticks = [0];
  for (let power = decades <= 2 ? 1 : 10; ticks[ticks.length - 1]! < max; power *= 10)
    for (const step of steps) if (ticks[ticks.length - 1]! < max) ticks.push(step * power);
  return ticks;
}

/** A strategy's row title: its name, and whether (and when) it recovered. */
function rowLabel(r: OutageResult): string {
  const name = r.protected ? `${r.strategy} + protect` : r.strategy;
  return `${name}: ${r.recovered ? `recovered ${(r.recoveryMs ?? 0) / 1000} s after the resume` : 'never recovered'}`;
}

/**
 * Per strategy, one row titled above it: requests per second (ok, timeouts,
 * refused by the breaker) and the server's concurrency (symlog, ticks at
 * 1-2-5 or powers of ten), the outage shaded.
 */
export function outageSvg(params: OutageParams, results: OutageResult[]): Promise<string> {
  const load: { strategy: string; t: number; series: string; value: number }[] = [];
  const concurrency: { strategy: string; t: number; value: number }[] = [];
  const withBreaker = params.breaker !== undefined || results.some((r) => r.protected);
  let peak = params.server.concurrencyLimit;
  for (const r of results) {
    const label = rowLabel(r);
    for (const s of r.perSecond) {
      load.push({ strategy: label, t: s.t, series: 'ok', value: s.ok });
      load.push({ strategy: label, t: s.t, series: 'timeouts', value: s.timeouts });
      if (withBreaker) load.push({ strategy: label, t: s.t, series: 'refused', value: s.errors });
      concurrency.push({ strategy: label, t: s.t, value: s.concurrency });
      if (s.concurrency > peak) peak = s.concurrency;
    }
  }
  const order = results.map(rowLabel);
  const ticks = symlogTicks(peak);
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
  const cell = { width: 380, height: 100 };
  const x = {
    field: 't',
    type: 'quantitative' as const,
    title: 'time (s)',
    axis: { tickMinStep: 1, labelFontSize: 11, titleFontSize: 12 },
  };
  const maxLoad = Math.max(1, ...load.map((d) => d.value));
  const yAxis = { labelFontSize: 11, titleFontSize: 12 };
  const spec: TopLevelSpec = {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: {
      text: `Outage: ${params.clients} clients, server stopped ${start}–${end} s (shaded)`,
      subtitle:
        `backoff base ${params.policy.baseMs} ms ×${params.policy.factor}, timeout ${params.timeoutMs} ms; ` +
        `server ${params.server.minDelayMs} ms up to ${params.server.concurrencyLimit} in flight (dashed), backlog ${params.server.backlog}` +
        (params.breaker ? '; with breaker' : '') +
        (params.budget ? `; with ${params.budget.kind} budget` : ''),
      fontSize: 15,
      subtitleFontSize: 12,
    },
    // One row per run, titled above both its plots, level: rotated beside them (as facet
    // headers), long titles ran into each other and the y axes' titles.
    vconcat: order.map((label, row) => {
      const last = row === order.length - 1;
      const xAxis = { ...x, title: last ? x.title : null };
      return {
        title: { text: label, anchor: 'start' as const, fontSize: 12, offset: 6 },
        hconcat: [
          {
            ...cell,
            data: { values: load.filter((d) => d.strategy === label) },
            layer: [
              { ...outage, transform: [{ filter: "datum.t === 0 && datum.series === 'ok'" }] },
              {
                mark: { type: 'line' as const, strokeWidth: 1.2 },
                encoding: {
                  x: xAxis,
                  y: {
                    field: 'value',
                    type: 'quantitative' as const,
                    title: 'requests/s',
                    scale: { domain: [0, maxLoad], nice: true },
                    axis: { ...yAxis, tickCount: 4 },
                  },
                  color: {
                    field: 'series',
                    type: 'nominal' as const,
                    scale: {
                      domain: series,
                      range: series.map((s) => colors[s as keyof typeof colors]),
                    },
                    title: null,
                    legend: { labelFontSize: 12, symbolStrokeWidth: 3 },
                  },
                },
              },
            ],
          },
          {
            ...cell,
            data: { values: concurrency.filter((d) => d.strategy === label) },
            layer: [
              { ...outage, transform: [{ filter: 'datum.t === 0' }] },
              {
                mark: {
                  type: 'area' as const,
                  color: colors.concurrency,
                  opacity: 0.7,
                  line: true,
                },
                // One series per cell: nothing to stack (and symlog cannot be stacked).
                encoding: {
                  x: xAxis,
                  y: {
                    field: 'value',
                    type: 'quantitative' as const,
                    title: 'in flight (log)',
                    scale: { type: 'symlog' as const, domain: [0, ticks.at(-1)!] },
                    axis: {
                      ...yAxis,
                      values: ticks,
                      // Vega thins given values down to tickCount on a continuous scale.
                      tickCount: ticks.length,
                      labelOverlap: false,
                      labelExpr: "format(datum.value, ',')",
                    },
                    stack: null,
                  },
                },
              },
              {
                mark: { type: 'rule' as const, strokeDash: [4, 3], color: '#555' },
                encoding: { y: { datum: params.server.concurrencyLimit } },
                transform: [{ filter: 'datum.t === 0' }],
              },
            ],
          },
        ],
      };
    }),
    config: {
      font: 'sans-serif',
      concat: { spacing: 16 },
      legend: { orient: 'top' },
    },
  };
  return render(spec);
}
