// The admin API under /admin: JSON in and out; the token, when one is needed,
// is kept in sessionStorage and sent as a bearer header.

export const tokenKey = 'requeue.adminToken';

export class Unauthorized extends Error {}

/** Calls the admin API: JSON in and out, the error's own message on failure. */
export async function api(path, { method = 'GET', body } = {}) {
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

export const q = (name) => encodeURIComponent(name);
