import { createRequire } from 'node:module';
import { ConfigError } from '../../errors/config-error.js';

/**
 * The BullMQ minor version requeue is tested with, and the only one it runs
 * on: this folder reaches into BullMQ's insides (its scripts' arguments, a
 * worker's protected members, its key layout), which a minor release may
 * change without a word. package.json's peer range says the same (a unit
 * test holds them together).
 */
export const supportedBullmq = '6.7';

/**
 * Why requeue will not run on BullMQ `version` — one line naming the versions
 * it supports — or `undefined` when it is a supported one.
 */
export function bullmqVersionProblem(version: string): string | undefined {
  if (version.startsWith(`${supportedBullmq}.`) && /^\d+\.\d+\.\d+/.test(version)) return undefined;
  return `bullmq: requeue runs only on bullmq ${supportedBullmq}.x (the version it is tested with), found ${version}: npm install bullmq@${supportedBullmq}`;
}

let installed: string | undefined;

/** The installed BullMQ's version (from its package.json; read once), or `'unknown'`. */
export function installedBullmqVersion(): string {
  if (installed === undefined) {
    try {
      const pkg = createRequire(import.meta.url)('bullmq/package.json') as { version?: unknown };
      installed = typeof pkg.version === 'string' ? pkg.version : 'unknown';
    } catch {
      installed = 'unknown';
    }
  }
  return installed;
}

/**
 * Throws a {@link ConfigError} (one line naming the supported versions) unless
 * BullMQ `version` is one requeue is tested with. Called when a worker or a
 * queue is made.
 *
 * @param version - defaults to the installed BullMQ's
 */
export function assertSupportedBullmq(version: string = installedBullmqVersion()): void {
  const problem = bullmqVersionProblem(version);
  if (problem !== undefined) throw new ConfigError(problem);
}
