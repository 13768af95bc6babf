// The selected queue's circuit breakers, with reset and isolate.
import { Badge, BreakerState } from './badges.js';
import { api, q } from '../lib/api.js';
import { ago, time, duration, pct } from '../lib/format.js';
import { html } from '../lib/html.js';
import { usePoll } from '../lib/use-poll.js';

export function BreakersPanel({ queue, tick, onError, ask, refresh }) {
  const [data, error] = usePoll(`/queues/${q(queue)}/breakers`, tick, onError);
  const act = (verb, key) =>
    ask({
      title: `${verb === 'open' ? 'Open' : 'Close'} the breaker ${key}?`,
      message:
        verb === 'open'
          ? 'Workers stop taking its jobs until someone closes it by hand.'
          : 'It closes now and its failure window is cleared.',
      verb: verb === 'open' ? 'Open breaker' : 'Close breaker',
      danger: verb === 'open',
      action: async () => {
        await api(`/queues/${q(queue)}/breakers/${verb}`, { method: 'POST', body: { key } });
        refresh(`breaker ${key} ${verb === 'open' ? 'opened' : 'closed'}`);
      },
    });
  const budget = data?.budget;
  return html`<section class="panel" data-testid="breakers">
    <h3>
      Circuit breakers
      ${data && !data.enabled && html`<${Badge} tone="muted">not used by this queue's workers<//>`}
    </h3>
    ${error && html`<div class="notice bad">${error}</div>`}
    <table>
      <thead>
        <tr>
          <th>Key</th>
          <th>State</th>
          <th class="num">Failures</th>
          <th class="num">Rate</th>
          <th>Opened</th>
          <th>Half-opens</th>
          <th></th>
        </tr>
      </thead>
      <tbody>
        ${(data?.breakers ?? []).map(
          (b) =>
            html`<tr key=${b.key} data-testid=${`breaker-${b.key}`}>
              <td class="mono">${b.key}</td>
              <td><${BreakerState} b=${b} /></td>
              <td class="num">${b.failures}/${b.total}</td>
              <td class="num">${pct(b.failureRate)}</td>
              <td title=${time(b.openedAt)}>${b.openedAt ? ago(b.openedAt) : ''}</td>
              <td title=${time(b.halfOpenAt)}>
                ${b.isolated ? 'by hand' : b.halfOpenAt ? ago(b.halfOpenAt) : ''}
              </td>
              <td class="actions">
                ${
                  // A breaker no worker of this queue consults: opening it would change nothing.
                  !data.enabled
                    ? ''
                    : b.state === 'closed'
                      ? html`<button class="danger" onClick=${() => act('open', b.key)}>
                          Open
                        </button>`
                      : html`<button onClick=${() => act('close', b.key)}>Close</button>`
                }
              </td>
            </tr>`,
        )}
      </tbody>
    </table>
    <p class="muted">
      ${
        budget == null
          ? 'No retry budget.'
          : budget.kind === 'token-bucket'
            ? `Retry budget: ${budget.tokens}/${budget.capacity} tokens, ${budget.denied} retries denied.`
            : `Retry budget: ${budget.retries} retries / ${budget.requests} requests in ${duration(budget.windowMs)} (ratio ${budget.ratio}).`
      }
      ${(data?.paused ?? []).map((p) => html` Paused: ${p.key} ${ago(p.until)}.`)}
    </p>
  </section>`;
}
