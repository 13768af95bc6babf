// One endpoint's recent deliveries (from the delivery log) with the actions
// that apply to each — resend a delivered message, run a scheduled retry
// now — and the recover action below them.
import { Badge } from './badges.js';
import { EndpointRecover } from './endpoint-recover.js';
import { api, q } from '../lib/api.js';
import { duration, time } from '../lib/format.js';
import { html } from '../lib/html.js';
import { usePoll } from '../lib/use-poll.js';

const tone = { delivered: 'ok', retrying: 'warn', dead: 'bad' };
const listStyle = { listStyle: 'none', margin: 0, padding: 0 };
// Each entry wraps within the screen's width (390 px and up).
const itemStyle = {
  display: 'flex',
  flexWrap: 'wrap',
  gap: '4px 10px',
  alignItems: 'center',
  padding: '4px 0',
  borderBottom: '1px solid var(--line)',
  overflowWrap: 'anywhere',
};

export function EndpointDetail({ queue, endpointId, tick, onError, ask, refresh }) {
  const path = `/queues/${q(queue)}/deliveries?endpoint=${q(endpointId)}&limit=10`;
  const [data, error] = usePoll(path, tick, onError);
  const entries = data?.entries ?? [];
  // Only a job's newest entry can be acted on: an older "retrying" has run since.
  const newest = new Set();
  const latest = entries.filter((e) => !newest.has(e.jobId) && newest.add(e.jobId));
  const resend = (e) =>
    ask({
      title: `Resend ${e.messageId} to ${endpointId}?`,
      message:
        'A new delivery of the same message (same webhook-id: the receiver can dedupe), with its own history.',
      verb: 'Resend',
      action: async () => {
        const r = await api(`/queues/${q(queue)}/endpoints/${q(endpointId)}/resend`, {
          method: 'POST',
          body: { message: e.messageId },
        });
        refresh(`resend ${r.resend} of ${e.messageId} to ${endpointId} queued`);
      },
    });
  const retryNow = async (e) => {
    const job = await api(`/queues/${q(queue)}/jobs/${q(e.jobId)}`).catch((err) => ({
      where: err.message,
    }));
    if (job.where !== 'delayed') return refresh(`${e.messageId} is not waiting for a retry now`);
    ask({
      title: `Retry ${e.messageId} to ${endpointId} now?`,
      message: `Due ${time(job.nextAttemptAt)}. It runs at once — only if it is still the retry shown here (none has run or been put back since).`,
      verb: 'Retry now',
      action: async () => {
        try {
          await api(`/queues/${q(queue)}/deliveries/${q(job.id)}/retry-now`, {
            method: 'POST',
            body: { attemptsStarted: job.attemptsStarted },
          });
          refresh(`${e.messageId} to ${endpointId} is due now`);
        } catch (err) {
          refresh(`not retried: ${err.message}`);
        }
      },
    });
  };
  return html`<div class="endpoint-detail" data-testid=${`endpoint-detail-${endpointId}`}>
    <h4>Recent deliveries</h4>
    ${error && html`<div class="notice bad">${error}</div>`}
    ${
      data && entries.length === 0
        ? html`<div class="empty">No delivery logged for this endpoint.</div>`
        : html`<ul class="deliveries" style=${listStyle}>
            ${entries.map(
              (e) =>
                html`<li
                  key=${e.id}
                  style=${itemStyle}
                  data-testid=${`delivery-${e.messageId}-${e.attempt}`}
                >
                  <span>${time(e.at)}</span>
                  <span class="mono">${e.messageId}</span>
                  <span>#${e.attempt}</span>
                  <${Badge} tone=${tone[e.outcome]} title=${e.deadReason ?? ''}>${e.outcome}<//>
                  <span class="mono">${e.status ?? e.code ?? ''}</span>
                  <span>${duration(e.latencyMs)}</span>
                  ${
                    latest.includes(e) &&
                    e.outcome === 'delivered' &&
                    html`<button data-testid="resend" onClick=${() => resend(e)}>Resend</button>`
                  }
                  ${
                    latest.includes(e) &&
                    e.outcome === 'retrying' &&
                    html`<button data-testid="retry-now" onClick=${() => retryNow(e)}>
                      Retry now
                    </button>`
                  }
                </li>`,
            )}
          </ul>`
    }
    <${EndpointRecover} queue=${queue} endpointId=${endpointId} ask=${ask} refresh=${refresh} />
  </div>`;
}
