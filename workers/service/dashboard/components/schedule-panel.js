// Upcoming retries and deferrals of the selected queue.
import { useState } from 'preact/hooks';
import { KindBadge } from './badges.js';
import { RetryChart } from './retry-chart.js';
import { q } from '../lib/api.js';
import { ago, time } from '../lib/format.js';
import { html } from '../lib/html.js';
import { usePoll } from '../lib/use-poll.js';

export function SchedulePanel({ queue, tick, onError }) {
  const [horizon, setHorizon] = useState('hour');
  const [data, error] = usePoll(
    `/queues/${q(queue)}/schedule?horizon=${horizon}&limit=10&only=retries`,
    tick,
    onError,
  );
  const due = data?.due;
  const now = data?.now ?? Date.now();
  return html`<section class="panel" data-testid="schedule">
    <h3>
      Upcoming retries
      <span class="spacer"></span>
      <select value=${horizon} onChange=${(e) => setHorizon(e.target.value)} data-testid="horizon">
        <option value="minute">next minute</option>
        <option value="hour">next hour</option>
        <option value="day">next day</option>
      </select>
    </h3>
    ${error && html`<div class="notice bad">${error}</div>`}
    <div class="summary">
      <div><b data-testid="due-overdue">${due?.overdue ?? '–'}</b><span>overdue</span></div>
      <div>
        <b data-testid="due-minute">${due?.withinMinute ?? '–'}</b><span>within a minute</span>
      </div>
      <div><b data-testid="due-hour">${due?.withinHour ?? '–'}</b><span>within an hour</span></div>
      <div><b data-testid="due-day">${due?.withinDay ?? '–'}</b><span>within a day</span></div>
      <div><b>${due?.later ?? '–'}</b><span>later</span></div>
    </div>
    <${RetryChart} timeline=${data?.timeline} />
    <table data-testid="upcoming">
      <thead>
        <tr>
          <th>Next attempt</th>
          <th>Job</th>
          <th>Why</th>
          <th class="num">Attempt</th>
          <th>Last error</th>
        </tr>
      </thead>
      <tbody>
        ${(data?.upcoming ?? []).map(
          (j) =>
            html`<tr key=${j.id}>
              <td class="nowrap" title=${time(j.dueAt)}>${ago(j.dueAt, now)}</td>
              <td class="mono id" title=${j.id}>${j.name} · ${j.key ?? j.id}</td>
              <td><${KindBadge} kind=${j.kind} /></td>
              <td class="num">${j.attempt ?? ''}</td>
              <td class="err" title=${j.lastError ?? ''}>${j.lastError ?? ''}</td>
            </tr>`,
        )}
      </tbody>
    </table>
    ${data && data.upcoming.length === 0 && html`<div class="empty">No retry scheduled.</div>`}
    ${
      data?.notRetries > 0 &&
      html`<div class="muted small" data-testid="not-retries">
        Not counted: ${data.notRetries} job${data.notRetries === 1 ? '' : 's'} added with a delay
        (under Jobs, delayed).
      </div>`
    }
    ${data?.partial && html`<div class="muted small">Counted among the soonest 10,000 delayed jobs.</div>`}
  </section>`;
}
