import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { ConfigError } from '../errors/config-error.js';

/**
 * The service's packages: its HTTP server and admin API (Fastify and
 * plugins) and the dashboard's browser libraries. Optional peer
 * dependencies, so a library user's install does not bring them.
 */
export const servicePackages = [
  'fastify',
  '@fastify/static',
  '@fastify/swagger',
  'fastify-type-provider-zod',
  'preact',
  'htm',
  'uplot',
] as const;

/** `requeue simulate --svg`'s plotting packages, optional peers too. */
export const plotPackages = ['vega', 'vega-lite'] as const;

/**
 * Checks that optional peer dependencies are installed before the code that
 * imports them is loaded, so a missing one is one line naming what to
 * install (a {@link ConfigError}: exit code 2), not a module-not-found stack.
 * `feature` starts the message (`--svg`, `env.METRICS_PORT`, `npm start`).
 */
export function requireOptional(packages: readonly string[], feature: string): void {
  const missing = packages.filter((name) => !installed(name));
  if (missing.length === 0) return;
  throw new ConfigError(
    `${feature} needs ${missing.join(', ')}, not installed with requeue (optional peer ${
      missing.length === 1 ? 'dependency' : 'dependencies'
    }): npm install ${packages.join(' ')}`,
  );
}

/**
 * Whether `name` is in a `node_modules` Node searches from requeue's own
 * location, where its peers are (by folder, not by resolving an entry: the
 * packages differ in which export conditions they offer).
 */
function installed(name: string): boolean {
  const dirs = createRequire(import.meta.url).resolve.paths(name) ?? [];
  return dirs.some((dir) => existsSync(join(dir, name, 'package.json')));
}
