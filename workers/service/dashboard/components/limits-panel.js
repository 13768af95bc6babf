// Adaptive concurrency: the fleet's learned limit per key; shown only when a key has one.
import { q } from '../lib/api.js';
import { ago, time } from '../lib/format.js';
import { html } from '../lib/html.js';
import { usePoll } from '../lib/use-poll.js';

/** Adaptive concurrency: the fleet's learned limit per key; shown only when a key has one. */
export function LimitsPanel({ queue, tick, onError }) {
  const [data, error] = usePoll(`/queues/${q(queue)}/limits?max=20`, tick, onError);
  if (!error && !data?.limits?.length) return null;
  return html`<section class="panel" data-testid="limits">
    <h3>Adaptive concurrency</h3>
    ${error && html`<div class="notice bad">${error}</div>`}
    <table>
      <thead>
        <tr>
          <th>Key</th>
          <th class="num">Limit</th>
          <th class="num">In flight</th>
          <th>Last decrease</th>
        </tr>
      </thead>
      <tbody>
        ${(data?.limits ?? []).map(
          (l) =>
            html`<tr key=${l.key} data-testid=${`limit-${l.key}`}>
              <td class="mono">${l.key}</td>
              <td class="num">${l.admits ?? 'initial'}</td>
              <td class="num">${l.inFlight}</td>
              <td title=${time(l.decreasedAt)}>${l.decreasedAt ? ago(l.decreasedAt) : ''}</td>
            </tr>`,
        )}
      </tbody>
    </table>
    ${data && data.keys > data.limits.length && html`<p class="muted">${data.keys - data.limits.length} more keys.</p>`}
  </section>`;
}
