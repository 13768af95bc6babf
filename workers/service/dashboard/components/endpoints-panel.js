// A webhook queue's endpoints, with disable and enable.
import { Badge, BreakerState } from './badges.js';
import { api, q } from '../lib/api.js';
import { html } from '../lib/html.js';
import { usePoll } from '../lib/use-poll.js';

export function EndpointsPanel({ queue, tick, onError, ask, refresh }) {
  const [data, error] = usePoll(`/queues/${q(queue)}/endpoints`, tick, onError);
  const act = (verb, id) =>
    ask({
      title: `${verb === 'disable' ? 'Disable' : 'Enable'} endpoint ${id}?`,
      message:
        verb === 'disable'
          ? 'Its deliveries will be dead-lettered as endpoint-disabled until it is enabled again.'
          : 'Deliveries to it start again; jobs already dead-lettered stay in the DLQ.',
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
        ? html`<div class="empty">No endpoint has failed or been disabled.</div>`
        : html`<table>
            <thead>
              <tr>
                <th>Endpoint</th>
                <th>Delivery</th>
                <th>Breaker</th>
                <th>Reason</th>
                <th></th>
              </tr>
            </thead>
            <tbody>
              ${rows.map(
                (e) =>
                  html`<tr key=${e.endpointId}>
                    <td class="mono">${e.endpointId}</td>
                    <td>
                      ${
                        e.disabled
                          ? html`<${Badge} tone="bad">disabled<//>`
                          : html`<${Badge} tone="ok">enabled<//>`
                      }
                    </td>
                    <td>${e.breaker ? html`<${BreakerState} b=${e.breaker} />` : ''}</td>
                    <td class="err" title=${e.reason ?? ''}>${e.reason ?? ''}</td>
                    <td class="actions">
                      ${
                        e.disabled
                          ? html`<button onClick=${() => act('enable', e.endpointId)}>
                              Enable
                            </button>`
                          : html`<button
                              class="danger"
                              onClick=${() => act('disable', e.endpointId)}
                            >
                              Disable
                            </button>`
                      }
                    </td>
                  </tr>`,
              )}
            </tbody>
          </table>`
    }
  </section>`;
}
