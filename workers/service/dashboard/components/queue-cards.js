// One card per queue with its counts (and, for a broker consumer's retry queue, its source); a click selects the queue.
import { Badge } from './badges.js';
import { html } from '../lib/html.js';

export function QueueCards({ queues, selected, onSelect }) {
  const order = ['waiting', 'active', 'delayed', 'completed', 'failed', 'dead'];
  return html`<div class="queues" data-testid="queues">
    ${queues.map(
      (queue) =>
        html`<button
          class=${`queue-card ${queue.name === selected ? 'selected' : ''}`}
          data-testid=${`queue-${queue.name}`}
          onClick=${() => onSelect(queue.name)}
        >
          <h2>
            ${queue.name}
            <${Badge} tone="muted">${queue.kind}<//>
          </h2>
          ${
            queue.source &&
            html`<div class="queue-source" data-testid="queue-source">
              ${`retries of ${queue.kind === 'nats' ? 'stream/consumer' : 'queue'} `}<b
                >${queue.source}</b
              >
            </div>`
          }
          <div class="counts">
            ${order
              // BullMQ's failed set stays empty under requeue (a death goes to the DLQ): shown only
              // when a job failed outside requeue, never as an always-0 column.
              .filter((state) => state !== 'failed' || queue.counts.failed > 0)
              .map(
                (state) =>
                  html`<div
                    class=${`count ${state} ${queue.counts[state] > 0 ? 'some' : ''}`}
                    data-testid=${`count-${state}`}
                  >
                    <b>${queue.counts[state] ?? 0}</b><span>${state}</span>
                  </div>`,
              )}
          </div>
        </button>`,
    )}
  </div>`;
}
