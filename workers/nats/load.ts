import type * as Nats from 'nats';
import { requireOptional } from '../../src/util/optional-deps.js';

/** The `nats` client's API, as `requeue/nats` uses it. */
export type NatsClient = typeof Nats;

/**
 * Loads `nats`, an optional peer dependency: a missing one is one line
 * naming what to install (a `ConfigError`), not a module-not-found stack.
 */
export async function loadNats(): Promise<NatsClient> {
  requireOptional(['nats'], 'requeue/nats');
  const mod = (await import('nats')) as NatsClient & { default?: NatsClient };
  return mod.default ?? mod;
}
