import type * as Amqplib from 'amqplib';
import { requireOptional } from '../../src/util/optional-deps.js';

/** amqplib's API, as `requeue/amqp` uses it. */
export type AmqpClient = typeof Amqplib;

/**
 * Loads amqplib, an optional peer dependency: a missing one is one line
 * naming what to install (a `ConfigError`), not a module-not-found stack.
 */
export async function loadAmqplib(): Promise<AmqpClient> {
  requireOptional(['amqplib'], 'requeue/amqp');
  const mod = (await import('amqplib')) as AmqpClient & { default?: AmqpClient };
  return mod.default ?? mod;
}
