// Recover an endpoint's dead deliveries since a time: a dry run gives the
// count, the confirmation names it, the run goes in its own lane behind live
// traffic and its progress is shown until it ends.
import { useEffect, useState } from 'preact/hooks';
import { api, q } from '../lib/api.js';
import { html } from '../lib/html.js';

/** A datetime-local value as ms since the epoch, or undefined when empty or bad. */
function ms(value) {
  const t = value ? new Date(value).getTime() : NaN;
  return Number.isFinite(t) ? t : undefined;
}

/** `Date.now() - hours` as a datetime-local value (the browser's time zone). */
function hoursAgo(hours) {
  const d = new Date(Date.now() - hours * 3_600_000);
  return new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
}

export function EndpointRecover({ queue, endpointId, ask, refresh }) {
  const [since, setSince] = useState(hoursAgo(24));
  const [until, setUntil] = useState('');
  const [preview, setPreview] = useState(undefined);
  const [problem, setProblem] = useState(undefined);
  const [progress, setProgress] = useState(undefined);
  const base = `/queues/${q(queue)}/endpoints/${q(endpointId)}/recover`;
  const range = () => ({
    since: String(ms(since)),
    ...(ms(until) !== undefined ? { until: String(ms(until)) } : {}),
  });
  useEffect(() => setPreview(undefined), [since, until]);
  useEffect(() => {
    if (!progress || progress.finished) return undefined;
    const timer = setTimeout(() => api(base).then(setProgress, (e) => setProblem(e.message)), 500);
    return () => clearTimeout(timer);
  }, [progress]);
  const dryRun = async () => {
    setProblem(undefined);
    if (ms(since) === undefined) return setProblem('give a time to recover from');
    try {
      setPreview(await api(base, { method: 'POST', body: { ...range(), dryRun: true } }));
    } catch (e) {
      setProblem(e.message);
    }
  };
  const recover = () =>
    ask({
      title: `Recover ${preview.count} dead deliveries of ${endpointId}?`,
      message:
        'They go back to the queue in their own lane, behind live deliveries, at most 100 a second; a delivery that died again meanwhile is left alone.',
      verb: `Recover ${preview.count}`,
      action: async () => {
        await api(base, { method: 'POST', body: range() });
        setPreview(undefined);
        setProgress({ done: 0, total: preview.count, finished: false });
        refresh(`recovery of ${endpointId} started`);
      },
    });
  return html`<div class="recover" data-testid=${`recover-${endpointId}`}>
    <h4>Recover dead deliveries</h4>
    <div class="filters">
      <label
        >Since
        <input
          type="datetime-local"
          value=${since}
          onChange=${(e) => setSince(e.target.value)}
          data-testid="recover-since"
      /></label>
      <label
        >Until
        <input
          type="datetime-local"
          value=${until}
          onChange=${(e) => setUntil(e.target.value)}
          data-testid="recover-until"
      /></label>
      <button onClick=${dryRun} data-testid="recover-preview">Preview</button>
      ${
        preview &&
        html`<span data-testid="recover-count">${preview.count} would be recovered</span>
          <button
            class="primary"
            disabled=${preview.count === 0}
            onClick=${recover}
            data-testid="recover-go"
          >
            Recover ${preview.count}…
          </button>`
      }
    </div>
    ${problem && html`<div class="notice bad">${problem}</div>`}
    ${
      progress &&
      html`<div class="muted" data-testid="recover-progress">
        ${progress.finished ? 'recovered' : 'recovering'} ${progress.done} of ${progress.total}
        ${progress.error ? ` — stopped: ${progress.error}` : ''}
      </div>`
    }
  </div>`;
}
