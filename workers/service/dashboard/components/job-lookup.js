// A job looked up by id or key, with its attempt history.
import { useState } from 'preact/hooks';
import { Badge, KindBadge } from './badges.js';
import { q } from '../lib/api.js';
import { ago, time, duration, errorText } from '../lib/format.js';
import { html } from '../lib/html.js';
import { usePoll } from '../lib/use-poll.js';

export function History({ history }) {
  if (!history || history.length === 0) return html`<div class="muted">No attempt recorded.</div>`;
  return html`<table data-testid="history">
    <thead>
      <tr>
        <th class="num">#</th>
        <th>Started</th>
        <th>Outcome</th>
        <th class="num">Status</th>
        <th class="num">Latency</th>
        <th>Error</th>
        <th>Decision</th>
        <th class="num">Delay</th>
      </tr>
    </thead>
    <tbody>
      ${history.map((a) => {
        const status = a.details?.status ?? a.error?.status;
        const latency =
          a.details?.latencyMs ?? (a.finishedAt != null ? a.finishedAt - a.startedAt : undefined);
        return html`<tr>
          <td class="num">${a.replay ? `${a.replay}.` : ''}${a.attempt}</td>
          <td class="nowrap">${time(a.startedAt)}</td>
          <td>
            <${Badge}
              tone=${a.outcome === 'succeeded' ? 'ok' : a.outcome === 'deferred' ? 'info' : 'bad'}
              >${a.outcome}<//
            >
          </td>
          <td class="num">${status ?? ''}</td>
          <td class="num">${latency != null ? duration(latency) : ''}</td>
          <td class="err" title=${errorText(a.error)}>${errorText(a.error)}</td>
          <td class="nowrap">
            ${a.decision === 'dead-letter' ? `dead (${a.deadReason ?? '?'})` : a.decision}
          </td>
          <td class="num">${a.delayMs != null ? duration(a.delayMs) : ''}</td>
        </tr>`;
      })}
    </tbody>
  </table>`;
}

export function JobLookup({ queue, tick, onError }) {
  const [input, setInput] = useState('');
  // The id looked up, with the queue it was looked up in: another queue starts empty.
  const [wanted, setWanted] = useState({ queue, id: '' });
  const id = wanted.queue === queue ? wanted.id : '';
  const [job, error] = usePoll(id ? `/queues/${q(queue)}/jobs/${q(id)}` : undefined, tick, onError);
  const shown = id && job && job.id !== undefined ? job : undefined;
  const tone = { dead: 'bad', delayed: 'warn', completed: 'ok', failed: 'bad' };
  return html`<section class="panel" data-testid="lookup">
    <h3>Find a job</h3>
    <form
      class="filters"
      onSubmit=${(e) => {
        e.preventDefault();
        setWanted({ queue, id: input.trim() });
      }}
    >
      <label
        >Job id or idempotency key
        <input
          value=${input}
          onInput=${(e) => setInput(e.target.value)}
          size="40"
          data-testid="lookup-id"
        />
      </label>
      <button type="submit">Look up</button>
    </form>
    ${id && error && html`<div class="notice bad">${error}</div>`}
    ${
      shown &&
      !error &&
      html`<div data-testid="lookup-result">
        <p>
          <span class="mono">${shown.name} · ${shown.id}</span>${' '}
          <${Badge} tone=${tone[shown.where] ?? 'info'}>${shown.where}<//>
          ${shown.delayKind && html` <${KindBadge} kind=${shown.delayKind} />`}
          ${
            shown.nextAttemptAt != null &&
            html`${' next attempt '}<b>${ago(shown.nextAttemptAt)}</b>${` (${time(shown.nextAttemptAt)})`}`
          }
          ${shown.where === 'dead' && html` ${shown.reason}: ${shown.message}`}
        </p>
        <${History} history=${shown.history} />
      </div>`
    }
  </section>`;
}
