// The histogram of retries due (uPlot).
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import { html } from '../lib/html.js';
import { retryChartOptions } from '../lib/retry-chart-options.js';

export function RetryChart({ timeline }) {
  const box = useRef(null);
  const plot = useRef(null);
  const data = timeline
    ? [timeline.counts.map((_, i) => (timeline.from + i * timeline.binMs) / 1000), timeline.counts]
    : [[], []];
  useEffect(() => {
    if (!box.current) return undefined;
    const width = () => Math.max(300, box.current.clientWidth);
    plot.current = new uPlot(retryChartOptions(uPlot, width()), data, box.current);
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
