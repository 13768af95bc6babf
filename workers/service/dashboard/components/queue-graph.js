// Throughput and failure rate of the selected queue per minute (uPlot), from
// BullMQ's event stream as the admin API counts it: completions per minute,
// and the share of finished attempts that failed (retried or dead).
import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import { q } from '../lib/api.js';
import { html } from '../lib/html.js';
import { countIncrs } from '../lib/retry-chart-options.js';
import { usePoll } from '../lib/use-poll.js';

const axisFont = '12px system-ui, -apple-system, "Segoe UI", sans-serif';
const labelFont = 'bold 12px system-ui, -apple-system, "Segoe UI", sans-serif';

/** The graph's series from the activity answer: [times, completed/min, failure rate %]. */
export function graphData(a) {
  if (!a) return [[], [], []];
  const times = a.completed.map((_, i) => (a.from + i * a.binMs) / 1000);
  const rate = a.completed.map((c, i) => {
    const failed = a.retried[i] + a.dead[i];
    const all = c + failed;
    return all === 0 ? null : Math.round((1000 * failed) / all) / 10;
  });
  return [times, a.completed, rate];
}

function options(width) {
  return {
    width,
    height: 220,
    legend: { show: true, live: false },
    cursor: { drag: { x: false, y: false } },
    scales: {
      x: { time: true },
      n: { range: (_u, _min, max) => [0, Math.max(1, max)] },
      pct: { range: [0, 100] },
    },
    axes: [
      { stroke: '#475467', grid: { stroke: '#eef0f3' }, font: axisFont, space: 70 },
      {
        scale: 'n',
        stroke: '#2f5fd0',
        grid: { stroke: '#eef0f3' },
        font: axisFont,
        label: 'completed / min',
        labelFont,
        labelSize: 20,
        size: 48,
        space: 24,
        incrs: countIncrs,
      },
      {
        scale: 'pct',
        side: 1,
        stroke: '#c4320a',
        grid: { show: false },
        font: axisFont,
        label: 'failed %',
        labelFont,
        labelSize: 20,
        size: 44,
        space: 24,
      },
    ],
    series: [
      {},
      {
        label: 'completed / min',
        scale: 'n',
        stroke: '#2f5fd0',
        width: 2,
        fill: 'rgba(47, 95, 208, 0.12)',
      },
      { label: 'failed %', scale: 'pct', stroke: '#c4320a', width: 2, spanGaps: false },
    ],
  };
}

export function QueueGraph({ queue, tick, onError }) {
  const [minutes, setMinutes] = useState(60);
  const [a, error] = usePoll(`/queues/${q(queue)}/activity?minutes=${minutes}`, tick, onError);
  const box = useRef(null);
  const plot = useRef(null);
  const data = graphData(a);
  useEffect(() => {
    if (!box.current) return undefined;
    const width = () => Math.max(300, box.current.clientWidth);
    plot.current = new uPlot(options(width()), data, box.current);
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
  }, [a]);
  const sum = (xs) => (xs ?? []).reduce((s, x) => s + x, 0);
  const known = a?.oldestAt != null && a.oldestAt > a.from;
  return html`<section class="panel" data-testid="queue-graph">
    <h3>
      Throughput and failures
      <span class="spacer"></span>
      <select value=${minutes} onChange=${(e) => setMinutes(Number(e.target.value))}>
        <option value="60">last hour</option>
        <option value="360">last 6 hours</option>
        <option value="1440">last day</option>
      </select>
    </h3>
    ${error && html`<div class="notice bad">${error}</div>`}
    <div class="summary">
      <div>
        <b data-testid="graph-completed">${a ? sum(a.completed) : '–'}</b><span>completed</span>
      </div>
      <div>
        <b data-testid="graph-retried">${a ? sum(a.retried) : '–'}</b
        ><span>retried or deferred</span>
      </div>
      <div><b data-testid="graph-dead">${a ? sum(a.dead) : '–'}</b><span>dead</span></div>
    </div>
    <div class="chart" ref=${box}></div>
    <div class="muted small">
      Per minute, from BullMQ's event stream (every worker writes it; BullMQ trims
      it)${
        known ? `: it holds events since ${new Date(a.oldestAt).toLocaleTimeString()} only` : ''
      }${a?.truncated ? '; the newest minutes are cut short' : ''}.
    </div>
  </section>`;
}
