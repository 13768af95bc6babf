import type { RedisClient } from '../redis/connection.js';
import { discoverQueues, queueExists } from '../redis/queue-discovery.js';
import { CliUsageError } from './cli-error.js';

/** At most this many names in one error line. */
const namesShown = 10;

/** `a, b, c, … 4 more`, or `none`: a list of names short enough for one line. */
export function someNames(names: readonly string[], max = namesShown): string {
  if (names.length === 0) return 'none';
  const more = names.length > max ? `, … ${names.length - max} more` : '';
  return names.slice(0, max).join(', ') + more;
}

/**
 * Refuses a queue with no BullMQ or requeue key on this Redis (a typo would
 * otherwise read as an empty queue with a closed breaker): one line naming
 * the known queues, exit code 2. A known queue with nothing in it passes.
 * Reads only.
 */
export async function requireKnownQueue(redis: RedisClient, queue: string): Promise<void> {
  if (await queueExists(redis, queue)) return;
  const known = await discoverQueues(redis);
  throw new CliUsageError(
    `<queue>: no queue "${queue}" on this Redis (known: ${someNames(known)})`,
  );
}
