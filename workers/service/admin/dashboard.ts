import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyPluginAsync } from 'fastify';

/** The dashboard's own files (HTML, ES modules: app.js and its lib/ and components/, CSS), copied into dist/ by the build. */
export const dashboardDir = fileURLToPath(new URL('../dashboard/', import.meta.url));

/**
 * The libraries the dashboard imports, served from the installed packages
 * (no CDN, no build step): path under `/assets/vendor/` → package and file.
 */
const vendorFiles: Record<string, { pkg: string; file: string; type: string }> = {
  'preact.mjs': { pkg: 'preact', file: 'preact.module.js', type: 'text/javascript' },
  'preact-hooks.mjs': { pkg: 'preact/hooks', file: 'hooks.module.js', type: 'text/javascript' },
  'htm.mjs': { pkg: 'htm', file: 'htm.module.js', type: 'text/javascript' },
  'uplot.mjs': { pkg: 'uplot', file: 'uPlot.esm.js', type: 'text/javascript' },
  'uplot.css': { pkg: 'uplot', file: 'uPlot.min.css', type: 'text/css' },
};

/**
 * The dashboard at `/`: static files from the package, and Preact, htm and
 * uPlot from `node_modules` (each package's entry's folder), read once at
 * start. The files hold no data; the page calls the admin API with the token.
 */
export const dashboard: FastifyPluginAsync = async (app) => {
  const require = createRequire(import.meta.url);
  const vendor = new Map<string, { body: Buffer; type: string }>();
  for (const [name, { pkg, file, type }] of Object.entries(vendorFiles)) {
    const body = await readFile(join(dirname(require.resolve(pkg)), file));
    vendor.set(name, { body, type: `${type}; charset=utf-8` });
  }
  app.get<{ Params: { file: string } }>('/assets/vendor/:file', async (request, reply) => {
    const found = vendor.get(request.params.file);
    if (!found) return reply.code(404).send({ error: 'not found' });
    return reply.type(found.type).header('cache-control', 'public, max-age=3600').send(found.body);
  });
  const csp = await contentSecurityPolicy();
  await app.register(fastifyStatic, {
    root: dashboardDir,
    prefix: '/',
    wildcard: false,
    index: 'index.html',
    cacheControl: false,
    setHeaders: (reply) => {
      reply.header('cache-control', 'no-cache');
      reply.header('x-content-type-options', 'nosniff');
      reply.header('content-security-policy', csp);
    },
  });
};

/**
 * The page may load scripts, styles and data only from the service itself
 * (nothing from the internet, nothing injected); its one inline script, the
 * import map, is allowed by its hash.
 */
async function contentSecurityPolicy(): Promise<string> {
  const page = await readFile(join(dashboardDir, 'index.html'), 'utf8');
  const hashes = [...page.matchAll(/<script type="importmap">([\s\S]*?)<\/script>/g)].map(
    (m) => `'sha256-${createHash('sha256').update(m[1]!).digest('base64')}'`,
  );
  return [
    "default-src 'self'",
    `script-src 'self' ${hashes.join(' ')}`,
    "style-src 'self'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
}
