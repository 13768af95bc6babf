// The queue's jobs by state (waiting, active, delayed, completed), paged, with
// pause/resume of the queue and, for a delayed job, retry-now and delete (each
// fenced by what the list read: a job that moved on is refused, not touched).
import { useEffect, useState } from 'preact/hooks';
import { Badge, KindBadge } from './badges.js';
import { JobView } from './job-view.js';
import { api, q } from '../lib/api.js';
import { ago, time } from '../lib/format.js';
import { html } from '../lib/html.js';
import { usePoll } from '../lib/use-poll.js';

const states = ['waiting', 'active', 'delayed', 'completed'];

function when(state, j) {
  if (state === 'delayed') return [ago(j.dueAt), time(j.dueAt)];
  if (state === 'completed') return [ago(j.finishedAt), time(j.finishedAt)];
  if (state === 'active') return [ago(j.processedAt), time(j.processedAt)];
  return [ago(j.addedAt), time(j.addedAt)];
}

export function JobList({ queue, tick, onError, ask, refresh }) {
  const [state, setState] = useState('waiting');
  const [pageSize, setPageSize] = useState(25);
  const [offset, setOffset] = useState(0);
  const [open, setOpen] = useState(undefined);
  useEffect(() => {
    setOffset(0);
    setOpen(undefined);
  }, [queue, state, pageSize]);
  const [data, error] = usePoll(
    `/queues/${q(queue)}/jobs?state=${state}&limit=${pageSize}&offset=${offset}`,
    tick,
    onError,
  );
  const items = data?.items ?? [];
  const total = data?.total ?? 0;
  const label = (j) => j.key ?? j.id;
  const move = (j, verb) =>
    ask({
      title: `${verb === 'retry-now' ? 'Run' : 'Delete'} ${label(j)} ${verb === 'retry-now' ? 'now' : ''}?`,
      message:
        verb === 'retry-now'
          ? 'It goes to the front of the waiting jobs. If it has moved on since this list was read, nothing happens.'
          : 'Deleted for good. If it has moved on since this list was read, nothing happens.',
      verb: verb === 'retry-now' ? 'Retry now' : 'Delete',
      danger: verb === 'delete',
      action: async () => {
        try {
          await api(`/queues/${q(queue)}/delayed/${q(j.id)}/${verb}`, {
            method: 'POST',
            body: j.fence,
          });
          refresh(`${verb === 'retry-now' ? 'moved to waiting' : 'deleted'}: ${label(j)}`);
        } catch (e) {
          refresh(`refused: ${e.message}`);
        }
      },
    });
  const togglePause = () =>
    ask({
      title: `${data?.paused ? 'Resume' : 'Pause'} ${queue}?`,
      message: data?.paused
        ? 'Workers fetch jobs again.'
        : 'Workers fetch nothing new until resumed; running jobs finish, retries stay scheduled.',
      verb: data?.paused ? 'Resume' : 'Pause',
      danger: !data?.paused,
      action: async () => {
        const r = await api(`/queues/${q(queue)}/${data?.paused ? 'resume' : 'pause'}`, {
          method: 'POST',
        });
        refresh(`${queue} ${r.paused ? 'paused' : 'resumed'}`);
      },
    });
  return html`<section class="panel" data-testid="jobs">
      <h3>
        Jobs ${data?.paused && html`<${Badge} tone="warn">paused<//>`}
        <span class="spacer"></span>
        <button data-testid="pause-toggle" disabled=${!data} onClick=${togglePause}>
          ${data?.paused ? 'Resume queue' : 'Pause queue'}
        </button>
      </h3>
      <div class="filters tabs" role="tablist">
        ${states.map(
          (s) =>
            html`<button
              role="tab"
              aria-selected=${s === state}
              class=${s === state ? 'primary' : ''}
              data-testid=${`tab-${s}`}
              onClick=${() => setState(s)}
            >
              ${s}
            </button>`,
        )}
        <label
          >Page size
          <select
            value=${pageSize}
            onChange=${(e) => setPageSize(Number(e.target.value))}
            data-testid="page-size"
          >
            ${[10, 25, 50, 100].map((n) => html`<option value=${n}>${n}</option>`)}
          </select>
        </label>
      </div>
      ${error && html`<div class="notice bad">${error}</div>`}
      ${
        data && items.length === 0
          ? html`<div class="empty">No ${state} job.</div>`
          : html`<table data-testid="job-rows">
              <thead>
                <tr>
                  <th>Job</th>
                  <th>
                    ${{ waiting: 'Added', active: 'Started', delayed: 'Due', completed: 'Finished' }[state]}
                  </th>
                  <th class="num">Attempts</th>
                  <th>Last error</th>
                  <th></th>
                </tr>
              </thead>
              <tbody>
                ${items.map((j) => {
                  const [rel, abs] = when(state, j);
                  return html`<tr
                    key=${j.id}
                    class="clickable"
                    data-testid=${`job-${label(j)}`}
                    onClick=${() => setOpen(j.id)}
                  >
                    <td class="mono id" title=${j.id}>${j.name} · ${label(j)}</td>
                    <td class="nowrap" title=${abs}>
                      ${rel} ${j.kind && html`<${KindBadge} kind=${j.kind} />`}
                    </td>
                    <td class="num">${j.attemptsStarted}</td>
                    <td class="err" title=${j.lastError ?? ''}>${j.lastError ?? ''}</td>
                    <td class="actions" onClick=${(e) => e.stopPropagation()}>
                      ${
                        state === 'delayed' &&
                        html`<button data-testid="retry-now" onClick=${() => move(j, 'retry-now')}>
                            Retry now
                          </button>
                          <button
                            class="danger"
                            data-testid="delete"
                            onClick=${() => move(j, 'delete')}
                          >
                            Delete
                          </button>`
                      }
                    </td>
                  </tr>`;
                })}
              </tbody>
            </table>`
      }
      <div class="pager" data-testid="jobs-pager">
        ${total > 0 && `${offset + 1}–${Math.min(offset + items.length, total)} of ${total}`}
        <button disabled=${offset === 0} onClick=${() => setOffset(Math.max(0, offset - pageSize))}>
          Prev
        </button>
        <button
          disabled=${offset + pageSize >= total}
          onClick=${() => setOffset(offset + pageSize)}
        >
          Next
        </button>
      </div>
    </section>
    ${open && html`<${JobView} queue=${queue} id=${open} tick=${tick} onError=${onError} onClose=${() => setOpen(undefined)} />`}`;
}
