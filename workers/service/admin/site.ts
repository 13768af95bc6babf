/**
 * Which requests the service answers at all: the one rule against other
 * sites, applied by one `onRequest` hook on the whole Fastify app, so every
 * route — the admin API, the dashboard's files, the intake, a route added
 * later, the 404 handler — is behind it.
 *
 * - DNS rebinding: without an admin token the admin surface is open to
 *   whoever can connect to loopback. A page on another site whose name the
 *   attacker re-points at 127.0.0.1 is "same-origin" to the browser, but its
 *   requests carry the attacker's name in `Host` (browsers cannot forge it):
 *   only loopback names, loopback addresses and configured names are answered.
 * - Cross-site requests: a form, or `fetch(…, { mode: 'no-cors' })`, can
 *   POST from any page without a preflight, with or without a body, token or
 *   not (a cookie-less bearer token is not sent, but nothing should rest on
 *   that). Every state-changing request from another origin is refused: its
 *   `Origin` differs from the request's own, or `Sec-Fetch-Site` says
 *   `cross-site` or `same-site` (another port on 127.0.0.1 is same-site).
 *   Clients that send neither (curl, the CLI, the intake's producers) pass.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { isLoopbackHost, type AdminAccess } from './access.js';

/** The rule a service applies to every request. */
export interface SiteRules {
  /**
   * `Host` must be loopback or one of `allowedHosts` (any port); `false`: any
   * `Host` (a token guards the admin API, or it is not served).
   */
  hostCheck: false | { allowedHosts: readonly string[] };
}

/** The strictest rule: loopback `Host` only. What a server gets unless told otherwise. */
export const loopbackOnly: SiteRules = Object.freeze({ hostCheck: { allowedHosts: [] } });

/**
 * The rule for an admin access: the `Host` check when the admin API is
 * served without a token (loopback), none otherwise.
 */
export function siteRules(access: AdminAccess, allowedHosts: readonly string[]): SiteRules {
  return access.kind === 'loopback' ? { hostCheck: { allowedHosts } } : { hostCheck: false };
}

/** What the rule reads of a request. */
export interface SiteRequest {
  method: string;
  /** The `Host` header as sent (with its port). */
  host: string | undefined;
  /** `http` or `https`: how the client reached the service (a TLS proxy's `X-Forwarded-Proto`). */
  scheme: string;
  origin: string | undefined;
  secFetchSite: string | undefined;
}

/** Why a request is refused, as the client is told. */
export interface SiteRefusal {
  status: 403 | 421;
  error: string;
}

/** RFC 9110's safe methods: every other one (POST, PUT, PATCH, DELETE, any new one) may change state. */
const safeMethods = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE']);

/** `name:port`, `[v6]:port` or a bare name → the name (brackets off); undefined if malformed. */
function hostName(host: string): string | undefined {
  const match = /^(?:\[([0-9a-f:.]+)\]|([^:[\]\s]+))(?::\d{1,5})?$/i.exec(host);
  return (match?.[1] ?? match?.[2])?.toLowerCase();
}

/** `scheme://host[:port]` normalised (case, default port), or undefined. */
function originOf(text: string): string | undefined {
  try {
    const url = new URL(text);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.origin : undefined;
  } catch {
    return undefined;
  }
}

/** Why `request` is refused under `rules`, or undefined when it is answered. */
export function siteRefusal(request: SiteRequest, rules: SiteRules): SiteRefusal | undefined {
  const host = request.host ?? '';
  if (rules.hostCheck) {
    const name = hostName(host);
    const allowed =
      name !== undefined &&
      (isLoopbackHost(name) || rules.hostCheck.allowedHosts.some((h) => h.toLowerCase() === name));
    if (!allowed) {
      return {
        status: 421,
        error: `host "${host.slice(0, 100)}" is not this service: without an admin token only loopback names and admin.allowedHosts are answered`,
      };
    }
  }
  if (safeMethods.has(request.method.toUpperCase())) return undefined;
  const site = request.secFetchSite?.toLowerCase();
  if (site === 'cross-site' || site === 'same-site') {
    return { status: 403, error: `cross-site request refused (Sec-Fetch-Site: ${site})` };
  }
  if (request.origin !== undefined) {
    const own = originOf(`${request.scheme}://${host}`);
    if (own === undefined || originOf(request.origin) !== own) {
      return {
        status: 403,
        error: `cross-site request refused: Origin ${request.origin.slice(0, 100)} is not ${own ?? 'this service'}`,
      };
    }
  }
  return undefined;
}

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * The `onRequest` hook that applies `rules` to every request. The scheme
 * honours `X-Forwarded-Proto` (a TLS proxy's): a browser cannot add that
 * header to a cross-origin request without a preflight, which this server
 * never grants.
 */
export function siteGuard(rules: SiteRules) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const forwarded = header(request, 'x-forwarded-proto')?.split(',')[0]?.trim().toLowerCase();
    const refusal = siteRefusal(
      {
        method: request.method,
        host: header(request, 'host'),
        scheme: forwarded === 'https' || forwarded === 'http' ? forwarded : request.protocol,
        origin: header(request, 'origin'),
        secFetchSite: header(request, 'sec-fetch-site'),
      },
      rules,
    );
    if (refusal) await reply.code(refusal.status).send({ error: refusal.error });
  };
}
