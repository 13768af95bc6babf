// Small labels: a tone, a breaker state, a kind of due job.
import { html } from '../lib/html.js';

export function Badge({ tone, children, title }) {
  return html`<span class=${`badge ${tone}`} title=${title}>${children}</span>`;
}

export function BreakerState({ b }) {
  if (b.state === 'open')
    return html`<${Badge} tone="bad">${b.isolated ? 'open (isolated)' : 'open'}<//>`;
  if (b.state === 'half-open') return html`<${Badge} tone="warn">half-open<//>`;
  return html`<${Badge} tone="ok">closed<//>`;
}

export function KindBadge({ kind }) {
  const tone = kind === 'retry' ? 'warn' : kind === 'deferral' ? 'info' : 'muted';
  return html`<${Badge} tone=${tone}>${kind}<//>`;
}
