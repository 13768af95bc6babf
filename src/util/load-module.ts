import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ConfigError } from '../errors/config-error.js';

/** A module whose default export is a function: a job or message handler. */
export interface HandlerModule<F extends (...args: never[]) => unknown> {
  /** The default export. */
  handler: F;
  /** Every export, for the optional ones a caller looks for (a stream handler's `schema`). */
  exports: Readonly<Record<string, unknown>>;
}

/**
 * Imports the module at `path` (relative to the working directory) and
 * checks that its default export is a function. Throws a {@link ConfigError}
 * that starts with `label`, the option that named the path
 * (`--handler`, `env.HANDLER`, `config.queues.0.handler`).
 */
export async function loadHandlerModule<F extends (...args: never[]) => unknown>(
  path: string,
  label: string,
): Promise<HandlerModule<F>> {
  let exports: Record<string, unknown>;
  try {
    exports = (await import(pathToFileURL(resolve(path)).href)) as Record<string, unknown>;
  } catch (err) {
    throw new ConfigError(`${label}: cannot load ${path} (${(err as Error).message})`);
  }
  if (typeof exports.default !== 'function') {
    throw new ConfigError(`${label}: ${path} has no default export function`);
  }
  return { handler: exports.default as F, exports };
}
