// Asks for the admin token when the API answers 401.
import { useState } from 'preact/hooks';
import { tokenKey } from '../lib/api.js';
import { html } from '../lib/html.js';

export function TokenPrompt({ onSaved, message }) {
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
