// A webhook queue's delivery log: every attempt, searchable by message,
// endpoint, event type, status and outcome, newest first, older pages by cursor.
import { useEffect, useState } from 'preact/hooks';
import { Badge } from './badges.js';
import { q } from '../lib/api.js';
import { duration, time } from '../lib/format.js';
import { html } from '../lib/html.js';
import { usePoll } from '../lib/use-poll.js';

const empty = { message: '', endpoint: '', type: '', status: '', outcome: '' };
const outcomeTone = { delivered: 'ok', retrying: 'warn', dead: 'bad' };

/** The answer an attempt got: its status, or the error code when none came. */
function Answer({ e }) {
  if (e.reason === 'tls-certificate')
    return html`<${Badge} tone="bad" title=${`TLS certificate refused: ${e.code ?? ''}`}>
      certificate ${e.code ?? ''}
    <//>`;
  if (e.status !== undefined) return html`<span class="mono">${e.status}</span>`;
  return html`<span class="mono">${e.code ?? 'no answer'}</span>`;
}

export function DeliveryLog({ queue, tick, onError }) {
  const pageSize = 25;
  const [filters, setFilters] = useState(empty);
  const [cursors, setCursors] = useState([]);
  useEffect(() => {
    setFilters(empty);
    setCursors([]);
  }, [queue]);
  const params = new URLSearchParams({ limit: String(pageSize) });
  for (const [key, value] of Object.entries(filters)) if (value) params.set(key, value.trim());
  const cursor = cursors.at(-1);
  if (cursor) params.set('cursor', cursor);
  const [data, error] = usePoll(`/queues/${q(queue)}/deliveries?${params}`, tick, onError);
  const set = (key) => (ev) => {
    setFilters({ ...filters, [key]: ev.target.value });
    setCursors([]);
  };
  const rows = data?.entries ?? [];
  const text = (key, label, size = 14) =>
    html`<label
      >${label}
      <input
        value=${filters[key]}
        onChange=${set(key)}
        placeholder="any"
        size=${size}
        data-testid=${`log-${key}`}
      />
    </label>`;
  return html`<section class="panel" data-testid="delivery-log">
    <h3>Delivery log</h3>
    <div class="filters">
      ${text('message', 'Message id')} ${text('endpoint', 'Endpoint')} ${text('type', 'Event type')}
      ${text('status', 'Status', 5)}
      <label
        >Outcome
        <select value=${filters.outcome} onChange=${set('outcome')} data-testid="log-outcome">
          <option value="">any</option>
          ${Object.keys(outcomeTone).map((o) => html`<option value=${o}>${o}</option>`)}
        </select>
      </label>
    </div>
    ${error && html`<div class="notice bad">${error}</div>`}
    ${
      data && rows.length === 0
        ? html`<div class="empty">No attempt matches.</div>`
        : html`<table>
            <thead>
              <tr>
                <th>Time</th>
                <th>Message</th>
                <th>Type</th>
                <th>Endpoint</th>
                <th class="num">#</th>
                <th>Outcome</th>
                <th>Answer</th>
                <th class="num">Latency</th>
                <th>Response</th>
              </tr>
            </thead>
            <tbody>
              ${rows.map(
                (e) =>
                  html`<tr key=${e.id} data-testid=${`log-${e.messageId}-${e.attempt}`}>
                    <td>${time(e.at)}</td>
                    <td class="mono">${e.messageId}</td>
                    <td>${e.eventType}</td>
                    <td class="mono">${e.endpointId}</td>
                    <td class="num">${e.attempt}</td>
                    <td>
                      <${Badge} tone=${outcomeTone[e.outcome]} title=${e.deadReason ?? ''}>
                        ${e.outcome}
                      <//>
                    </td>
                    <td><${Answer} e=${e} /></td>
                    <td class="num">${duration(e.latencyMs)}</td>
                    <td class="err" title=${e.error ?? e.excerpt ?? ''}>
                      ${e.excerpt ?? e.error ?? ''}
                    </td>
                  </tr>`,
              )}
            </tbody>
          </table>`
    }
    <div class="filters">
      <button disabled=${cursors.length === 0} onClick=${() => setCursors(cursors.slice(0, -1))}>
        Newer
      </button>
      <button
        disabled=${!data?.next}
        onClick=${() => setCursors([...cursors, data.next])}
        data-testid="log-older"
      >
        Older
      </button>
    </div>
  </section>`;
}
