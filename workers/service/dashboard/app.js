// The requeue dashboard: Preact + htm + uPlot, served by the service from the
// installed packages (no build step, nothing from the internet). Every number
// comes from the admin API under /admin; the token, when one is needed, is kept
// in sessionStorage and sent as a bearer header.
import { h, render } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import htm from 'htm';
import uPlot from 'uplot';

const html = htm.bind(h);
const refreshMs = 3000;
const tokenKey = 'requeue.adminToken';
const deadReasons = [
  'permanent-error',
  'gone',
  'max-attempts',
  'max-elapsed',
  'invalid-payload',
  'budget-exhausted',
  'endpoint-disabled',
  'max-deferrals',
];

class Unauthorized extends Error {}

/** Calls the admin API: JSON in and out, the error's own message on failure. */
async function api(path, { method = 'GET', body } = {}) {
  const headers = {};
  const token = sessionStorage.getItem(tokenKey);
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`/admin${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await res.json().catch(() => ({}));
  if (res.status === 401) throw new Unauthorized(data.error ?? 'token needed');
  if (!res.ok) throw new Error(data.error ?? `${res.status} ${res.statusText}`);
  return data;
}

const q = (name) => encodeURIComponent(name);

// ---------- formatting ----------

function ago(ms, now = Date.now()) {
  if (ms == null) return '';
  const d = ms - now;
  const s = Math.abs(d) / 1000;
  const text =
    s < 1
      ? 'now'
      : s < 60
        ? `${Math.round(s)}s`
        : s < 3600
          ? `${Math.floor(s / 60)}m ${Math.round(s % 60)}s`
          : s < 86400
            ? `${Math.floor(s / 3600)}h ${Math.round((s % 3600) / 60)}m`
            : `${Math.floor(s / 86400)}d ${Math.round((s % 86400) / 3600)}h`;
  if (text === 'now') return text;
  return d >= 0 ? `in ${text}` : `${text} ago`;
}

function time(ms) {
  if (ms == null) return '';
  const d = new Date(ms);
  const pad = (n, w = 2) => String(n).padStart(w, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

function duration(ms) {
  if (ms == null) return '';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return ago(Date.now() + ms).replace('in ', '');
}

function pct(x) {
  return `${Math.round((x ?? 0) * 100)}%`;
}

function errorText(e) {
  if (!e) return '';
  return `${e.class ?? 'Error'}${e.status ? ` ${e.status}` : ''}: ${e.message ?? ''}`;
}

// ---------- small components ----------

function Badge({ tone, children, title }) {
  return html`<span class=${`badge ${tone}`} title=${title}>${children}</span>`;
}

function BreakerState({ b }) {
  if (b.state === 'open')
    return html`<${Badge} tone="bad">${b.isolated ? 'open (isolated)' : 'open'}<//>`;
  if (b.state === 'half-open') return html`<${Badge} tone="warn">half-open<//>`;
  return html`<${Badge} tone="ok">closed<//>`;
}

function KindBadge({ kind }) {
  const tone = kind === 'retry' ? 'warn' : kind === 'deferral' ? 'info' : 'muted';
  return html`<${Badge} tone=${tone}>${kind}<//>`;
}

function Confirm({ ask, onClose }) {
  const [busy, setBusy] = useState(false);
  if (!ask) return null;
  const go = async () => {
    setBusy(true);
    try {
      await ask.action();
    } finally {
      setBusy(false);
      onClose();
    }
  };
  return html`<div class="modal-back" onClick=${(e) => e.target === e.currentTarget && onClose()}>
    <div class="modal" role="dialog" aria-modal="true" data-testid="confirm">
      <h4>${ask.title}</h4>
      <p>${ask.message}</p>
      <div class="actions">
        <button onClick=${onClose} disabled=${busy}>Cancel</button>
        <button
          class=${ask.danger ? 'danger primary' : 'primary'}
          data-testid="confirm-yes"
          onClick=${go}
          disabled=${busy}
        >
          ${ask.verb}
        </button>
      </div>
    </div>
  </div>`;
}

function TokenPrompt({ onSaved, message }) {
  const [value, setValue] = useState('');
  const save = (e) => {
    e.preventDefault();
    sessionStorage.setItem(tokenKey, value.trim());
    onSaved();
  };
  return html`<div class="modal-back">
    <form class="modal" onSubmit=${save} data-testid="token-prompt">
      <h4>Admin token</h4>
      <p>
        ${message ?? 'This service asks for its admin token'} (admin.token, REQUEUE_ADMIN_TOKEN). It
        is kept for this tab only.
      </p>
      <input
        type="password"
        autocomplete="off"
        value=${value}
        onInput=${(e) => setValue(e.target.value)}
        autofocus
      />
      <div class="actions"><button class="primary" type="submit">Use token</button></div>
    </form>
  </div>`;
}

// ---------- data hook ----------

/** Loads `path` now and on every tick; keeps the last good answer while a refresh fails. */
function usePoll(path, tick, onError) {
  const [data, setData] = useState(undefined);
  const [error, setError] = useState(undefined);
  // Another path (a filter, a page, another job) does not show the last one's answer.
  useEffect(() => {
    setData(undefined);
    setError(undefined);
  }, [path]);
  useEffect(() => {
    if (!path) return undefined;
    let live = true;
    api(path).then(
      (d) => {
        if (!live) return;
        setData(d);
        setError(undefined);
      },
      (e) => {
        if (!live) return;
        if (e instanceof Unauthorized) onError(e);
        setError(e.message);
      },
    );
    return () => {
      live = false;
    };
  }, [path, tick]);
  return [data, error];
}

// ---------- panels ----------

function QueueCards({ queues, selected, onSelect }) {
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
          <div class="counts">
            ${order.map(
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

function RetryChart({ timeline }) {
  const box = useRef(null);
  const plot = useRef(null);
  const data = timeline
    ? [timeline.counts.map((_, i) => (timeline.from + i * timeline.binMs) / 1000), timeline.counts]
    : [[], []];
  useEffect(() => {
    if (!box.current) return undefined;
    const width = () => Math.max(300, box.current.clientWidth);
    plot.current = new uPlot(
      {
        width: width(),
        height: 220,
        legend: { show: false },
        cursor: { drag: { x: false, y: false } },
        scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
        axes: [
          { stroke: '#667085', grid: { stroke: '#eef0f3' } },
          {
            stroke: '#667085',
            grid: { stroke: '#eef0f3' },
            size: 40,
            incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000, 10000],
          },
        ],
        series: [
          {},
          {
            label: 'retries due',
            stroke: '#2f5fd0',
            fill: 'rgba(47, 95, 208, 0.35)',
            paths: uPlot.paths.bars({ size: [0.8, 40], align: 1 }),
            points: { show: false },
          },
        ],
      },
      data,
      box.current,
    );
    const resize = new ResizeObserver(() => plot.current?.setSize({ width: width(), height: 220 }));
    resize.observe(box.current);
    return () => {
      resize.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
  }, []);
  useEffect(() => {
    plot.current?.setData(data);
  }, [timeline]);
  return html`<div class="chart" ref=${box} data-testid="retry-chart"></div>`;
}

function SchedulePanel({ queue, tick, onError }) {
  const [horizon, setHorizon] = useState('hour');
  const [data, error] = usePoll(
    `/queues/${q(queue)}/schedule?horizon=${horizon}&limit=10`,
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
              <td class="mono id" title=${j.id}>${j.name} · ${j.id}</td>
              <td><${KindBadge} kind=${j.kind} /></td>
              <td class="num">${j.attempt ?? ''}</td>
              <td class="err" title=${j.lastError ?? ''}>${j.lastError ?? ''}</td>
            </tr>`,
        )}
      </tbody>
    </table>
    ${data && data.upcoming.length === 0 && html`<div class="empty">Nothing scheduled.</div>`}
  </section>`;
}

function BreakersPanel({ queue, tick, onError, ask, refresh }) {
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
                  b.state === 'closed'
                    ? html`<button class="danger" onClick=${() => act('open', b.key)}>Open</button>`
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

/** Adaptive concurrency: the fleet's learned limit per key; shown only when a key has one. */
function LimitsPanel({ queue, tick, onError }) {
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

function EndpointsPanel({ queue, tick, onError, ask, refresh }) {
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

function History({ history }) {
  if (!history || history.length === 0) return html`<div class="muted">No attempt recorded.</div>`;
  return html`<table data-testid="history">
    <thead>
      <tr>
        <th class="num">#</th>
        <th>Started</th>
        <th>Outcome</th>
        <th class="num">Status</th>
        <th class="num">Latency</th>
        <th>Error</th>
        <th>Decision</th>
        <th class="num">Delay</th>
      </tr>
    </thead>
    <tbody>
      ${history.map((a) => {
        const status = a.details?.status ?? a.error?.status;
        const latency =
          a.details?.latencyMs ?? (a.finishedAt != null ? a.finishedAt - a.startedAt : undefined);
        return html`<tr>
          <td class="num">${a.replay ? `${a.replay}.` : ''}${a.attempt}</td>
          <td class="nowrap">${time(a.startedAt)}</td>
          <td>
            <${Badge}
              tone=${a.outcome === 'succeeded' ? 'ok' : a.outcome === 'deferred' ? 'info' : 'bad'}
              >${a.outcome}<//
            >
          </td>
          <td class="num">${status ?? ''}</td>
          <td class="num">${latency != null ? duration(latency) : ''}</td>
          <td class="err" title=${errorText(a.error)}>${errorText(a.error)}</td>
          <td class="nowrap">
            ${a.decision === 'dead-letter' ? `dead (${a.deadReason ?? '?'})` : a.decision}
          </td>
          <td class="num">${a.delayMs != null ? duration(a.delayMs) : ''}</td>
        </tr>`;
      })}
    </tbody>
  </table>`;
}

function JobLookup({ queue, tick, onError }) {
  const [input, setInput] = useState('');
  // The id looked up, with the queue it was looked up in: another queue starts empty.
  const [wanted, setWanted] = useState({ queue, id: '' });
  const id = wanted.queue === queue ? wanted.id : '';
  const [job, error] = usePoll(id ? `/queues/${q(queue)}/jobs/${q(id)}` : undefined, tick, onError);
  const shown = id && job && job.id !== undefined ? job : undefined;
  const tone = { dead: 'bad', delayed: 'warn', completed: 'ok', failed: 'bad' };
  return html`<section class="panel" data-testid="lookup">
    <h3>Find a job</h3>
    <form
      class="filters"
      onSubmit=${(e) => {
        e.preventDefault();
        setWanted({ queue, id: input.trim() });
      }}
    >
      <label
        >Job id or idempotency key
        <input
          value=${input}
          onInput=${(e) => setInput(e.target.value)}
          size="40"
          data-testid="lookup-id"
        />
      </label>
      <button type="submit">Look up</button>
    </form>
    ${id && error && html`<div class="notice bad">${error}</div>`}
    ${
      shown &&
      !error &&
      html`<div data-testid="lookup-result">
        <p>
          <span class="mono">${shown.name} · ${shown.id}</span>${' '}
          <${Badge} tone=${tone[shown.where] ?? 'info'}>${shown.where}<//>
          ${shown.delayKind && html` <${KindBadge} kind=${shown.delayKind} />`}
          ${
            shown.nextAttemptAt != null &&
            html`${' next attempt '}<b>${ago(shown.nextAttemptAt)}</b>${` (${time(shown.nextAttemptAt)})`}`
          }
          ${shown.where === 'dead' && html` ${shown.reason}: ${shown.message}`}
        </p>
        <${History} history=${shown.history} />
      </div>`
    }
  </section>`;
}

function DeadPanel({ queue, tick, onError, ask, refresh }) {
  const pageSize = 20;
  const [filters, setFilters] = useState({ reason: '', name: '', since: '', until: '' });
  const [offset, setOffset] = useState(0);
  const [open, setOpen] = useState(undefined);
  useEffect(() => {
    setOffset(0);
    setOpen(undefined);
  }, [queue]);
  const params = new URLSearchParams({ limit: String(pageSize), offset: String(offset) });
  const body = {};
  for (const key of ['reason', 'name'])
    if (filters[key]) params.set(key, (body[key] = filters[key]));
  for (const key of ['since', 'until'])
    if (filters[key]) params.set(key, (body[key] = String(new Date(filters[key]).getTime())));
  const [data, error] = usePoll(`/queues/${q(queue)}/dlq?${params}`, tick, onError);
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
  const hasFilter = Boolean(filters.reason || filters.name || filters.since || filters.until);
  const items = data?.items ?? [];
  const total = data?.total ?? 0;
  return html`<section class="panel" data-testid="dlq">
    <h3>
      Dead letters <${Badge} tone=${total > 0 ? 'bad' : 'muted'}>${total}<//>
      <span class="spacer"></span>
      <button
        disabled=${total === 0}
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
        disabled=${total === 0}
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
    <div class="filters">
      <label
        >Reason
        <select value=${filters.reason} onChange=${set('reason')} data-testid="filter-reason">
          <option value="">any</option>
          ${deadReasons.map((r) => html`<option value=${r}>${r}</option>`)}
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
        ? html`<div class="empty">No dead job${hasFilter ? ' matches' : ''}.</div>`
        : html`<table>
            <thead>
              <tr>
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
                        <td colspan="6">
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

// ---------- the app ----------

function App() {
  const [tick, setTick] = useState(0);
  const [live, setLive] = useState(true);
  const [needToken, setNeedToken] = useState(false);
  const [selected, setSelected] = useState(
    decodeURIComponent(location.hash.replace(/^#q=/, '')) || undefined,
  );
  const [confirm, setConfirm] = useState(undefined);
  const [notice, setNotice] = useState(undefined);
  const [updatedAt, setUpdatedAt] = useState(undefined);
  const onError = useCallback(() => setNeedToken(true), []);
  const [overview, error] = usePoll('/queues', tick, onError);

  useEffect(() => {
    if (!live) return undefined;
    const timer = setInterval(() => {
      if (document.visibilityState === 'visible') setTick((t) => t + 1);
    }, refreshMs);
    return () => clearInterval(timer);
  }, [live]);
  useEffect(() => {
    if (overview) setUpdatedAt(Date.now());
  }, [overview]);
  const queues = overview?.queues ?? [];
  const current = queues.find((x) => x.name === selected) ?? queues[0];
  const select = (name) => {
    setSelected(name);
    history.replaceState(null, '', `#q=${encodeURIComponent(name)}`);
  };
  const refresh = (message) => {
    setNotice(message);
    setTick((t) => t + 1);
  };
  const panel = { tick, onError, ask: setConfirm, refresh };
  const stale = error && updatedAt;
  return html`<header>
      <h1>requeue</h1>
      <span class="spacer"></span>
      <span class=${`live ${stale ? 'stale' : ''}`} data-testid="updated">
        ${
          stale
            ? `refresh failed: ${error}`
            : updatedAt
              ? `updated ${time(updatedAt).slice(11)}${live ? `, every ${refreshMs / 1000} s` : ', paused'}`
              : ''
        }
      </span>
      <button onClick=${() => setLive(!live)}>${live ? 'Pause' : 'Resume'}</button>
      <button onClick=${() => setTick((t) => t + 1)}>Refresh</button>
    </header>
    <main>
      ${
        notice &&
        html`<div class="notice ok" data-testid="notice" onClick=${() => setNotice(undefined)}>
          ${notice}
        </div>`
      }
      ${error && !updatedAt && !needToken && html`<div class="notice bad">${error}</div>`}
      <${QueueCards} queues=${queues} selected=${current?.name} onSelect=${select} />
      ${
        current &&
        html`<div class="grid">
            <div>
              <${SchedulePanel} queue=${current.name} ...${panel} />
            </div>
            <div>
              <${BreakersPanel} queue=${current.name} ...${panel} />
              <${LimitsPanel} queue=${current.name} ...${panel} />
              <${JobLookup} queue=${current.name} ...${panel} />
              ${current.kind === 'webhook' && html`<${EndpointsPanel} queue=${current.name} ...${panel} />`}
            </div>
          </div>
          <${DeadPanel} queue=${current.name} ...${panel} />`
      }
    </main>
    <${Confirm} ask=${confirm} onClose=${() => setConfirm(undefined)} />
    ${
      needToken &&
      html`<${TokenPrompt}
        message=${sessionStorage.getItem(tokenKey) ? 'That token was refused' : undefined}
        onSaved=${() => {
          setNeedToken(false);
          setTick((t) => t + 1);
        }}
      />`
    }`;
}

const root = document.getElementById('app');
root.textContent = '';
render(html`<${App} />`, root);
