// The requeue dashboard: Preact + htm + uPlot, served by the service from the
// installed packages (no build step, nothing from the internet). Every number
// comes from the admin API under /admin; the token, when one is needed, is kept
// in sessionStorage and sent as a bearer header.
import { render } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { BreakersPanel } from './components/breakers-panel.js';
import { Confirm } from './components/confirm.js';
import { DeadPanel } from './components/dead-panel.js';
import { DeliveryLog } from './components/delivery-log.js';
import { JobList } from './components/job-list.js';
import { EndpointView } from './components/endpoint-view.js';
import { JobLookup } from './components/job-lookup.js';
import { LimitsPanel } from './components/limits-panel.js';
import { QueueCards } from './components/queue-cards.js';
import { QueueGraph } from './components/queue-graph.js';
import { SchedulePanel } from './components/schedule-panel.js';
import { TokenPrompt } from './components/token-prompt.js';
import { tokenKey } from './lib/api.js';
import { time } from './lib/format.js';
import { html } from './lib/html.js';
import { usePoll } from './lib/use-poll.js';

const refreshMs = 3000;

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
              <${QueueGraph} queue=${current.name} ...${panel} />
            </div>
            <div>
              <${BreakersPanel} queue=${current.name} ...${panel} />
              <${LimitsPanel} queue=${current.name} ...${panel} />
              <${JobLookup} queue=${current.name} ...${panel} />
            </div>
          </div>
          <${JobList} queue=${current.name} ...${panel} />
          <${DeadPanel} queue=${current.name} ...${panel} />
          ${current.kind === 'webhook' && html`<${EndpointView} queue=${current.name} ...${panel} />`}
          ${current.kind === 'webhook' && html`<${DeliveryLog} queue=${current.name} ...${panel} />`}`
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
