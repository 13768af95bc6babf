// The histogram of retries due (uPlot).
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import { html } from '../lib/html.js';

export function RetryChart({ timeline }) {
  const box = useRef(null);
  const plot = useRef(null);
  const data = timeline
    ? [timeline.counts.map((_, i) => (timeline.from + i * timeline.binMs) / 1000), timeline.counts]
    : [[], []];
  useEffect(() => {
    if (!box.current) return undefined;
    const width = () => Math.max(300, box.current.clientWidth);
    plot.current = new uPlot(
      {
        width: width(),
        height: 220,
        legend: { show: false },
        cursor: { drag: { x: false, y: false } },
        scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
        axes: [
          { stroke: '#667085', grid: { stroke: '#eef0f3' } },
          {
            stroke: '#667085',
            grid: { stroke: '#eef0f3' },
            size: 40,
            incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000, 10000],
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
      },
      data,
      box.current,
    );
    const resize = new ResizeObserver(() => plot.current?.setSize({ width: width(), height: 220 }));
    resize.observe(box.current);
    return () => {
      resize.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
  }, []);
  useEffect(() => {
    plot.current?.setData(data);
  }, [timeline]);
  return html`<div class="chart" ref=${box} data-testid="retry-chart"></div>`;
}
