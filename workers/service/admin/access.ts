import ipaddr from 'ipaddr.js';

/** Who may use the admin API and the dashboard. */
export type AdminAccess =
  /** Callers must send `Authorization: Bearer <admin.token>`. */
  | { kind: 'token'; token: string }
  /** No token, but the server listens on loopback only: whoever can connect may. */
  | { kind: 'loopback' }
  /** No token and a non-loopback host: the admin routes are not served. */
  | { kind: 'refused' };

/** Whether `host` (an IP address or a name) is the loopback interface. */
export function isLoopbackHost(host: string): boolean {
  if (host.toLowerCase() === 'localhost') return true;
  const bare = host.replace(/^\[|\]$/g, '');
  if (!ipaddr.isValid(bare)) return false;
  const address = ipaddr.process(bare);
  return address.range() === 'loopback';
}

/**
 * The admin rule: a token if one is configured; else loopback only, and on
 * any other host nothing (the service still starts: intake and delivery do
 * not depend on the admin API).
 */
export function adminAccess(host: string, token: string | undefined): AdminAccess {
  if (token !== undefined) return { kind: 'token', token };
  return isLoopbackHost(host) ? { kind: 'loopback' } : { kind: 'refused' };
}
