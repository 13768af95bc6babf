// The confirmation dialog every change asks through.
import { useState } from 'preact/hooks';
import { html } from '../lib/html.js';

export function Confirm({ ask, onClose }) {
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
