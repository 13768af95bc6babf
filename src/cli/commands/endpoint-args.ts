import type { Command } from 'commander';
import { parseQueueName } from '../../policy/queue-name.js';
import { CliUsageError } from '../cli-error.js';

/** The queue endpoint commands act on unless told: the webhook worker's default. */
export const defaultEndpointQueue = 'webhooks';

/**
 * Declares an endpoint command's `<queue> <id>` / `<id> --queue <queue>`
 * arguments: both forms are accepted by every `requeue endpoint` command —
 * the older positional one (`endpoint enable webhooks ep-1`, a contract) and
 * the flag (`endpoint create ep-1 --queue webhooks`, the queue defaulting to
 * `webhooks`).
 */
export function withQueueAndId(command: Command, idName = 'id'): Command {
  return command
    .argument('<queue-or-id>', 'endpoint id; or the queue, when the id follows (older form)')
    .argument(`[${idName}]`, 'endpoint id, after the queue')
    .option('--queue <queue>', `webhook queue (default: ${defaultEndpointQueue})`);
}

/** The queue and endpoint id of {@link withQueueAndId}'s arguments; one line naming the clash. */
export function queueAndId(
  first: string,
  second: string | undefined,
  flagQueue: string | undefined,
  idName = 'id',
): { queue: string; id: string } {
  const pair =
    second === undefined
      ? { queue: flagQueue ?? defaultEndpointQueue, id: first }
      : { queue: first, id: second };
  if (second !== undefined && flagQueue !== undefined && flagQueue !== first)
    throw new CliUsageError(
      `--queue: "${flagQueue}" and the positional queue "${first}" differ; give one`,
    );
  if (pair.id.trim() === '') throw new CliUsageError(`<${idName}>: must not be empty`);
  parseQueueName(pair.queue, second === undefined ? '--queue' : '<queue>');
  return pair;
}

/** The queue of a command that takes no id (`endpoint list [queue]`): positional or `--queue`. */
export function queueOf(positional: string | undefined, flagQueue: string | undefined): string {
  if (positional !== undefined && flagQueue !== undefined && positional !== flagQueue)
    throw new CliUsageError(
      `--queue: "${flagQueue}" and the positional queue "${positional}" differ; give one`,
    );
  const queue = positional ?? flagQueue ?? defaultEndpointQueue;
  parseQueueName(queue, positional === undefined ? '--queue' : '<queue>');
  return queue;
}
