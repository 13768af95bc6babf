import type { FastifyReply } from 'fastify';
import type { IntakeServer } from '../http.js';
import type { AdminAccess } from './access.js';
import { dashboard } from './dashboard.js';
import { adminApi, type AdminApiOptions } from './routes.js';

export { adminAccess, isLoopbackHost, type AdminAccess } from './access.js';
export { siteRules, type SiteRules } from './site.js';
export type { AdminQueue } from './context.js';

/** What {@link registerAdmin} needs: the API's options with any access rule. */
export type AdminOptions = Omit<AdminApiOptions, 'access'> & { access: AdminAccess; host: string };

/**
 * Mounts the admin API under `/admin` and the dashboard at `/` — or, when
 * the access rule refuses them (no token, a non-loopback host), answers
 * both with a 403 that says how to enable them.
 */
export async function registerAdmin(app: IntakeServer, options: AdminOptions): Promise<void> {
  const { access } = options;
  if (access.kind === 'refused') {
    const refuse = async (_request: unknown, reply: FastifyReply) =>
      reply.code(403).send({ error: refusedMessage(options.host) });
    app.all('/admin', refuse);
    app.all('/admin/*', refuse);
    app.get('/', refuse);
    return;
  }
  await app.register(adminApi, { ...options, access, prefix: '/admin' });
  await app.register(dashboard);
}

function refusedMessage(host: string): string {
  return `the admin API and dashboard are off: host ${host} is not loopback and no admin token is set; set admin.token (REQUEUE_ADMIN_TOKEN) to serve them`;
}

/** The one line the service logs at start about the admin API. */
export function adminStartLine(access: AdminAccess, url: string, host: string): string {
  switch (access.kind) {
    case 'token':
      return `admin API and dashboard at ${url}/ (bearer token required)`;
    case 'loopback':
      return `admin API and dashboard at ${url}/ without a token: served because ${host} is loopback, to requests naming a loopback host or admin.allowedHosts; set admin.token (REQUEUE_ADMIN_TOKEN) to serve them on another host`;
    default:
      return refusedMessage(host);
  }
}
