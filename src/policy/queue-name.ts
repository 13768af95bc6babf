import { z } from 'zod';
import { limits } from './limits.js';
import { ConfigError } from '../errors/config-error.js';

/**
 * The suffix of a queue's dead-letter queue. A queue named `x.dlq` would be
 * taken for x's DLQ by tools that follow the convention, and could forge
 * dead records: refused.
 */
export const dlqSuffix = '.dlq';

/**
 * A queue name every entry point accepts (library, CLI, service config,
 * worker environments): 1–200 characters, no ":" (BullMQ refuses it: it
 * separates key parts), no "/" (it could not be addressed in
 * `/v1/jobs/:queue`), no whitespace or control characters, not ending in
 * `.dlq`.
 */
export const queueNameSchema = z
  .string({ error: 'must be a string' })
  .min(1, 'must not be empty')
  .max(limits.queueName, `must be at most ${limits.queueName} characters`)
  .refine((name) => !name.includes(':'), 'must not contain ":" (BullMQ refuses it)')
  .refine((name) => !name.includes('/'), 'must not contain "/"')
  .refine(
    // eslint-disable-next-line no-control-regex
    (name) => !/[\s\x00-\x1f\x7f]/.test(name),
    'must not contain spaces or control characters',
  )
  .refine(
    (name) => !name.toLowerCase().endsWith(dlqSuffix),
    `must not end in "${dlqSuffix}" (reserved for dead-letter queues)`,
  );

/**
 * A BullMQ key prefix (the library's `prefix` option): 1–100 characters, no
 * braces (requeue adds the queue's hash tag itself on a Redis Cluster; a tag
 * in the prefix would put every queue in one slot, away from requeue's own
 * keys), no whitespace or control characters.
 */
export const bullPrefixSchema = z
  .string({ error: 'must be a string' })
  .min(1, 'must not be empty')
  .max(100, 'must be at most 100 characters')
  .refine(
    (prefix) => !/[{}]/.test(prefix),
    'must not contain "{" or "}" (on a Redis Cluster requeue adds the queue\'s hash tag itself)',
  )
  .refine(
    // eslint-disable-next-line no-control-regex
    (prefix) => !/[\s\x00-\x1f\x7f]/.test(prefix),
    'must not contain spaces or control characters',
  );

/** Checks a `prefix` option; throws a {@link ConfigError} starting with `label`. */
export function parseBullPrefix(prefix: unknown, label = 'prefix'): string {
  const result = bullPrefixSchema.safeParse(prefix);
  if (!result.success) throw new ConfigError(`${label}: ${result.error.issues[0]?.message}`);
  return result.data;
}

/** Why `name` is not a valid queue name, or `undefined`. */
export function queueNameProblem(name: unknown): string | undefined {
  const result = queueNameSchema.safeParse(name);
  return result.success ? undefined : result.error.issues[0]?.message;
}

/**
 * Checks a queue name; throws a {@link ConfigError} that starts with
 * `label`, the option or argument that gave it.
 */
export function parseQueueName(name: unknown, label = 'queue'): string {
  const problem = queueNameProblem(name);
  if (problem !== undefined) {
    const shown = typeof name === 'string' ? ` ${JSON.stringify(name.slice(0, 60))}` : '';
    throw new ConfigError(`${label}:${shown} ${problem}`);
  }
  return name as string;
}

/**
 * Checks the queues one process runs together: each a valid name, no two the
 * same. `queues` maps a label (`config.queues.1.name`) to a name; the first
 * problem is thrown as a {@link ConfigError} naming both labels.
 */
export function checkQueueSet(queues: readonly { label: string; name: string }[]): void {
  const seen = new Map<string, string>();
  for (const { label, name } of queues) {
    parseQueueName(name, label);
    const earlier = seen.get(name);
    if (earlier !== undefined)
      throw new ConfigError(`${label}: "${name}" is already used by ${earlier}`);
    seen.set(name, label);
  }
}
