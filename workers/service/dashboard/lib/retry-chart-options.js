// The retry histogram's uPlot options, apart from the component so the browser
// test can draw the chart as shipped and read its axes.

/** Steps of 1, 2 and 5 per decade: ticks a reader can read at a glance. */
export const countIncrs = [1, 2, 5]
  .flatMap((step) => [1, 10, 100, 1_000, 10_000, 100_000].map((power) => step * power))
  .sort((a, b) => a - b);

const axisFont = '12px system-ui, -apple-system, "Segoe UI", sans-serif';
const labelFont = 'bold 12px system-ui, -apple-system, "Segoe UI", sans-serif';

/** Options for `new uPlot(...)`: a bar per time bin of retries due, `width` × 220 px. */
export function retryChartOptions(uPlot, width) {
  return {
    width,
    height: 220,
    legend: { show: false },
    cursor: { drag: { x: false, y: false } },
    scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
    axes: [
      { stroke: '#475467', grid: { stroke: '#eef0f3' }, font: axisFont, space: 70 },
      {
        stroke: '#475467',
        grid: { stroke: '#eef0f3' },
        font: axisFont,
        label: 'retries due',
        labelFont,
        labelSize: 20,
        size: 48,
        space: 24,
        incrs: countIncrs,
      },
    ],
    series: [
      {},
      {
        label: 'retries due',
        stroke: '#2f5fd0',
        fill: 'rgba(47, 95, 208, 0.35)',
        paths: uPlot.paths.bars({ size: [0.8, 40], align: 1 }),
        points: { show: false },
      },
    ],
  };
}
