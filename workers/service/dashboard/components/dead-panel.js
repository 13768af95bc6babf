// The dead-letter queue: filters, pages, replay and purge.
import { useEffect, useState } from 'preact/hooks';
import { Badge } from './badges.js';
import { History } from './job-lookup.js';
import { api, q } from '../lib/api.js';
import { ago, time } from '../lib/format.js';
import { html } from '../lib/html.js';
import { usePoll } from '../lib/use-poll.js';

export function DeadPanel({ queue, tick, onError, ask, refresh }) {
  const pageSize = 20;
  const [filters, setFilters] = useState({ reason: '', name: '', since: '', until: '' });
  const [offset, setOffset] = useState(0);
  const [open, setOpen] = useState(undefined);
  // Text search (server-side, over the redacted messages and payloads) and the rows ticked.
  const [searchInput, setSearchInput] = useState('');
  const [search, setSearch] = useState('');
  const [picked, setPicked] = useState([]);
  useEffect(() => {
    setOffset(0);
    setOpen(undefined);
    setPicked([]);
  }, [queue]);
  const params = new URLSearchParams({ limit: String(pageSize), offset: String(offset) });
  const body = {};
  for (const key of ['reason', 'name'])
    if (filters[key]) params.set(key, (body[key] = filters[key]));
  for (const key of ['since', 'until'])
    if (filters[key]) params.set(key, (body[key] = String(new Date(filters[key]).getTime())));
  const searchParams = new URLSearchParams({
    q: search,
    limit: String(pageSize),
    offset: String(offset),
  });
  const [data, error] = usePoll(
    search ? `/queues/${q(queue)}/dlq-search?${searchParams}` : `/queues/${q(queue)}/dlq?${params}`,
    tick,
    onError,
  );
  // The reasons the library files deaths under, from the admin API (read once).
  const [reasons] = usePoll('/dlq/reasons', 0, onError);
  const set = (key) => (e) => {
    setFilters({ ...filters, [key]: e.target.value });
    setOffset(0);
  };
  const bulk = (verb, filter, what) =>
    ask({
      title: `${verb === 'replay' ? 'Replay' : 'Purge'} ${what}?`,
      message:
        verb === 'replay'
          ? 'Back to the queue with fresh attempts; the history is kept.'
          : 'Deleted for good: this cannot be undone.',
      verb: verb === 'replay' ? 'Replay' : 'Purge',
      danger: verb === 'purge',
      action: async () => {
        const r = await api(`/queues/${q(queue)}/dlq/${verb}`, { method: 'POST', body: filter });
        const renamed = r.renamed?.length
          ? ` (${r.renamed.map((x) => `${x.from} as ${x.to}`).join(', ')}: id taken)`
          : '';
        refresh(
          `${verb === 'replay' ? 'replayed' : 'purged'} ${r.done} of ${r.total} dead job${r.total === 1 ? '' : 's'}${renamed}`,
        );
      },
    });
  const bulkPicked = (verb) =>
    ask({
      title: `${verb === 'replay' ? 'Replay' : 'Purge'} ${picked.length} selected dead job${picked.length === 1 ? '' : 's'}?`,
      message:
        verb === 'replay'
          ? 'Back to the queue with fresh attempts; the history is kept.'
          : 'Deleted for good: this cannot be undone.',
      verb: verb === 'replay' ? 'Replay' : 'Purge',
      danger: verb === 'purge',
      action: async () => {
        let done = 0;
        const failed = [];
        for (const id of picked) {
          try {
            done += (await api(`/queues/${q(queue)}/dlq/${verb}`, { method: 'POST', body: { id } }))
              .done;
          } catch (e) {
            failed.push(`${id}: ${e.message}`);
          }
        }
        setPicked([]);
        refresh(
          `${verb === 'replay' ? 'replayed' : 'purged'} ${done} of ${picked.length} selected${failed.length ? `; ${failed.join('; ')}` : ''}`,
        );
      },
    });
  const toggle = (id) =>
    setPicked(picked.includes(id) ? picked.filter((x) => x !== id) : [...picked, id]);
  const hasFilter = Boolean(filters.reason || filters.name || filters.since || filters.until);
  const items = data?.items ?? [];
  const total = data?.total ?? 0;
  return html`<section class="panel" data-testid="dlq">
    <h3>
      Dead letters <${Badge} tone=${total > 0 ? 'bad' : 'muted'}>${total}<//>
      <span class="spacer"></span>
      ${
        picked.length > 0 &&
        html`<button data-testid="replay-selected" onClick=${() => bulkPicked('replay')}>
            Replay selected (${picked.length})
          </button>
          <button class="danger" data-testid="purge-selected" onClick=${() => bulkPicked('purge')}>
            Purge selected (${picked.length})
          </button>`
      }
      <button
        disabled=${total === 0 || Boolean(search)}
        onClick=${() =>
          bulk(
            'replay',
            hasFilter ? body : { all: true },
            `all ${total} ${hasFilter ? 'matching ' : ''}dead jobs`,
          )}
      >
        Replay ${hasFilter ? 'matching' : 'all'}
      </button>
      <button
        class="danger"
        disabled=${total === 0 || Boolean(search)}
        onClick=${() =>
          bulk(
            'purge',
            hasFilter ? body : { all: true },
            `all ${total} ${hasFilter ? 'matching ' : ''}dead jobs`,
          )}
      >
        Purge ${hasFilter ? 'matching' : 'all'}
      </button>
    </h3>
    <form
      class="filters"
      onSubmit=${(e) => {
        e.preventDefault();
        setSearch(searchInput.trim());
        setOffset(0);
      }}
    >
      <label
        >Search errors and payloads
        <input
          value=${searchInput}
          onInput=${(e) => setSearchInput(e.target.value)}
          placeholder="text"
          size="24"
          data-testid="dlq-search"
        />
      </label>
      <button type="submit">Search</button>
      ${
        search &&
        html`<button
          type="button"
          onClick=${() => {
            setSearch('');
            setSearchInput('');
            setOffset(0);
          }}
        >
          Clear search
        </button>`
      }
      ${
        search &&
        data &&
        html`<span class="muted small" data-testid="search-scope">
          ${data.total} match${data.total === 1 ? '' : 'es'} in the newest ${data.scanned} dead
          jobs${data.complete ? ' (all of them)' : ''}
        </span>`
      }
    </form>
    <div class=${`filters ${search ? 'muted' : ''}`}>
      <label
        >Reason
        <select value=${filters.reason} onChange=${set('reason')} data-testid="filter-reason">
          <option value="">any</option>
          ${(reasons?.reasons ?? []).map((r) => html`<option value=${r}>${r}</option>`)}
        </select>
      </label>
      <label
        >Job name
        <input value=${filters.name} onChange=${set('name')} placeholder="any" size="12" />
      </label>
      <label
        >Dead since
        <input type="datetime-local" value=${filters.since} onChange=${set('since')} />
      </label>
      <label
        >Dead before
        <input type="datetime-local" value=${filters.until} onChange=${set('until')} />
      </label>
      ${
        hasFilter &&
        html`<button onClick=${() => setFilters({ reason: '', name: '', since: '', until: '' })}>
          Clear
        </button>`
      }
    </div>
    ${error && html`<div class="notice bad">${error}</div>`}
    ${
      data && items.length === 0
        ? html`<div class="empty">No dead job${hasFilter || search ? ' matches' : ''}.</div>`
        : html`<table>
            <thead>
              <tr>
                <th>
                  <input
                    type="checkbox"
                    aria-label="select the page"
                    data-testid="select-page"
                    checked=${items.length > 0 && items.every((d) => picked.includes(d.id))}
                    onChange=${(e) =>
                      setPicked(
                        e.target.checked
                          ? [...new Set([...picked, ...items.map((d) => d.id)])]
                          : picked.filter((id) => !items.some((d) => d.id === id)),
                      )}
                  />
                </th>
                <th>Job</th>
                <th>Reason</th>
                <th class="num">Attempts</th>
                <th>Dead</th>
                <th>Last error</th>
                <th></th>
              </tr>
            </thead>
            <tbody>
              ${items.map(
                (d) =>
                  html`<tr
                      key=${d.id}
                      class=${`clickable ${open === d.id ? 'expanded' : ''}`}
                      data-testid=${`dead-${d.idempotencyKey ?? d.id}`}
                      onClick=${() => setOpen(open === d.id ? undefined : d.id)}
                    >
                      <td onClick=${(e) => e.stopPropagation()}>
                        <input
                          type="checkbox"
                          aria-label=${`select ${d.idempotencyKey ?? d.id}`}
                          data-testid="select-dead"
                          checked=${picked.includes(d.id)}
                          onChange=${() => toggle(d.id)}
                        />
                      </td>
                      <td class="mono">
                        ${open === d.id ? '▾' : '▸'} ${d.name} · ${d.idempotencyKey ?? d.id}
                      </td>
                      <td><${Badge} tone="bad">${d.reason}<//></td>
                      <td class="num">
                        ${d.attempts}${d.replays ? ` (${d.replays} replays)` : ''}
                      </td>
                      <td class="nowrap" title=${time(d.deadAt)}>${ago(d.deadAt)}</td>
                      <td class="err" title=${d.message}>${d.message}</td>
                      <td class="actions" onClick=${(e) => e.stopPropagation()}>
                        <button
                          onClick=${() => bulk('replay', { id: d.id }, `dead job ${d.idempotencyKey ?? d.id}`)}
                        >
                          Replay
                        </button>
                        <button
                          class="danger"
                          onClick=${() => bulk('purge', { id: d.id }, `dead job ${d.idempotencyKey ?? d.id}`)}
                        >
                          Purge
                        </button>
                      </td>
                    </tr>
                    ${
                      open === d.id &&
                      html`<tr class="history">
                        <td colspan="7">
                          <div class="muted detail">
                            ${[
                              d.idempotencyKey ? `key ${d.idempotencyKey}` : '',
                              d.firstFailedAt ? `first failure ${time(d.firstFailedAt)}` : '',
                              `dead ${time(d.deadAt)}`,
                              d.replays ? `replayed ${d.replays}×` : '',
                            ]
                              .filter(Boolean)
                              .join(' · ')}
                            <div class="mono">data ${JSON.stringify(d.data).slice(0, 300)}</div>
                          </div>
                          <${History} history=${d.history} />
                        </td>
                      </tr>`
                    }`,
              )}
            </tbody>
          </table>`
    }
    <div class="pager">
      ${total > 0 && `${offset + 1}–${Math.min(offset + pageSize, total)} of ${total}`}
      <button disabled=${offset === 0} onClick=${() => setOffset(Math.max(0, offset - pageSize))}>
        Newer
      </button>
      <button disabled=${offset + pageSize >= total} onClick=${() => setOffset(offset + pageSize)}>
        Older
      </button>
    </div>
  </section>`;
}
