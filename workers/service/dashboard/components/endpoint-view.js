// A webhook queue's endpoints: registered ones with their subscriptions and
// rate limit, disabled ones with why, those the breaker has seen; each opens
// to its recent deliveries (resend, retry now) and the recover action.
import { useState } from 'preact/hooks';
import { Badge, BreakerState } from './badges.js';
import { EndpointDetail } from './endpoint-detail.js';
import { api, q } from '../lib/api.js';
import { html } from '../lib/html.js';
import { usePoll } from '../lib/use-poll.js';

const urlStyle = { overflowWrap: 'anywhere', fontSize: '12px', maxWidth: '28em' };

/** "20/s, burst 40", or a dash when unlimited. */
function rate(limit) {
  if (!limit) return '—';
  return `${limit.perSecond}/s${limit.burst !== undefined ? `, burst ${limit.burst}` : ''}`;
}

/** The event types it subscribes to: every type when it names none. */
function types(record) {
  if (!record) return html`<span class="muted">one-off URL</span>`;
  if (!record.types || record.types.length === 0) return html`<span class="muted">all types</span>`;
  return html`<span class="mono">${record.types.join(', ')}</span>`;
}

export function EndpointView({ queue, tick, onError, ask, refresh }) {
  const [data, error] = usePoll(`/queues/${q(queue)}/endpoints`, tick, onError);
  const [open, setOpen] = useState(undefined);
  const toggle = (verb, id) =>
    ask({
      title: `${verb === 'disable' ? 'Disable' : 'Enable'} endpoint ${id}?`,
      message:
        verb === 'disable'
          ? 'Its deliveries will be dead-lettered as endpoint-disabled until it is enabled again.'
          : 'Deliveries to it start again; recover what was dead-lettered meanwhile.',
      verb: verb === 'disable' ? 'Disable' : 'Enable',
      danger: verb === 'disable',
      action: async () => {
        await api(`/queues/${q(queue)}/endpoints/${q(id)}/${verb}`, {
          method: 'POST',
          ...(verb === 'disable' ? { body: { reason: 'disabled from the dashboard' } } : {}),
        });
        refresh(`endpoint ${id} ${verb}d`);
      },
    });
  const rows = data?.endpoints ?? [];
  return html`<section class="panel" data-testid="endpoints">
    <h3>Webhook endpoints</h3>
    ${error && html`<div class="notice bad">${error}</div>`}
    ${
      rows.length === 0
        ? html`<div class="empty">No endpoint is registered, disabled or seen failing.</div>`
        : html`<table>
            <thead>
              <tr>
                <th>Endpoint</th>
                <th>Status</th>
                <th>Subscriptions</th>
                <th>Rate limit</th>
                <th>Breaker</th>
                <th></th>
              </tr>
            </thead>
            <tbody>
              ${rows.map((e) => [
                html`<tr key=${e.endpointId} data-testid=${`endpoint-${e.endpointId}`}>
                  <td>
                    <div class="mono">${e.endpointId}</div>
                    ${e.registered && html`<div class="muted" style=${urlStyle}>${e.registered.url}</div>`}
                  </td>
                  <td>
                    ${
                      e.disabled
                        ? html`<${Badge} tone="bad">disabled<//>
                            <div class="err" title=${e.reason ?? ''}>${e.reason ?? ''}</div>`
                        : html`<${Badge} tone="ok">enabled<//>`
                    }
                  </td>
                  <td>${types(e.registered)}</td>
                  <td>${rate(e.registered?.rateLimit)}</td>
                  <td>${e.breaker ? html`<${BreakerState} b=${e.breaker} />` : ''}</td>
                  <td class="actions">
                    <button
                      aria-expanded=${open === e.endpointId}
                      data-testid=${`endpoint-open-${e.endpointId}`}
                      onClick=${() => setOpen(open === e.endpointId ? undefined : e.endpointId)}
                    >
                      ${open === e.endpointId ? 'Close' : 'Deliveries'}
                    </button>
                    ${
                      e.disabled
                        ? html`<button onClick=${() => toggle('enable', e.endpointId)}>
                            Enable
                          </button>`
                        : html`<button
                            class="danger"
                            onClick=${() => toggle('disable', e.endpointId)}
                          >
                            Disable
                          </button>`
                    }
                  </td>
                </tr>`,
                open === e.endpointId &&
                  html`<tr key=${`${e.endpointId}-detail`} class="detail">
                    <td colspan="6">
                      <${EndpointDetail}
                        queue=${queue}
                        endpointId=${e.endpointId}
                        tick=${tick}
                        onError=${onError}
                        ask=${ask}
                        refresh=${refresh}
                      />
                    </td>
                  </tr>`,
              ])}
            </tbody>
          </table>`
    }
  </section>`;
}
