// One job in full: where it is, its data, progress, options, last error (with
// BullMQ's stack when it kept one) and attempt history. Every field comes
// redacted from the admin API.
import { Badge, KindBadge } from './badges.js';
import { History } from './job-lookup.js';
import { q } from '../lib/api.js';
import { ago, errorText, time } from '../lib/format.js';
import { html } from '../lib/html.js';
import { usePoll } from '../lib/use-poll.js';

const tone = { dead: 'bad', delayed: 'warn', completed: 'ok', failed: 'bad', active: 'info' };

function Json({ value, testid }) {
  return html`<pre class="json" data-testid=${testid}>
${JSON.stringify(value ?? null, null, 2)}</pre>`;
}

export function JobView({ queue, id, tick, onError, onClose }) {
  const [job, error] = usePoll(`/queues/${q(queue)}/jobs/${q(id)}`, tick, onError);
  const last = job?.history?.filter((h) => h.error).at(-1);
  return html`<section class="panel job-view" data-testid="job-view">
    <h3>
      <span class="mono ellipsis"
        >${job?.name ?? ''} · ${job?.key ?? job?.idempotencyKey ?? id}</span
      >
      ${job && html`<${Badge} tone=${tone[job.where] ?? 'muted'}>${job.where}<//>`}
      ${job?.delayKind && html`<${KindBadge} kind=${job.delayKind} />`}
      <span class="spacer"></span>
      <button onClick=${onClose} data-testid="job-view-close">Close</button>
    </h3>
    ${error && html`<div class="notice bad">${error}</div>`}
    ${
      job &&
      html`<div class="detail muted">
          ${[
            `id ${job.id}`,
            job.addedAt ? `added ${time(job.addedAt)}` : '',
            job.nextAttemptAt
              ? `next attempt ${ago(job.nextAttemptAt)} (${time(job.nextAttemptAt)})`
              : '',
            job.attemptsStarted != null ? `${job.attemptsStarted} attempts started` : '',
            job.replays ? `replayed ${job.replays}×` : '',
            job.where === 'dead' ? `dead ${time(job.deadAt)}: ${job.reason}` : '',
          ]
            .filter(Boolean)
            .join(' · ')}
        </div>
        <div class="job-parts">
          <div>
            <h4>Data</h4>
            <${Json} value=${job.data} testid="job-data" />
          </div>
          <div>
            <h4>Progress</h4>
            <${Json} value=${job.progress} testid="job-progress" />
            <h4>Options</h4>
            <${Json} value=${job.opts ?? null} testid="job-opts" />
          </div>
        </div>
        <h4>Last error</h4>
        ${
          last || job.message || job.stack
            ? html`<div class="mono err-text" data-testid="job-error">
                ${last ? errorText(last.error) : job.message}
              </div>`
            : html`<div class="muted">None.</div>`
        }
        ${job.stack && html`<pre class="json" data-testid="job-stack">${job.stack}</pre>`}
        <h4>Attempts</h4>
        <${History} history=${job.history} />`
    }
  </section>`;
}
