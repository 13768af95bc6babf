/**
 * Every Redis key and queue name requeue uses, built in one place. requeue's
 * own keys put the queue name in a hash tag so that all of one queue's state
 * lands in one Redis Cluster slot.
 */

/** The BullMQ queue that holds a source queue's dead jobs. */
export function deadLetterQueueName(queue: string): string {
  return `${queue}.dlq`;
}

/** Keys of requeue's own state for one queue. */
export function requeueKeys(queue: string, prefix = 'requeue') {
  const base = `${prefix}:{${queue}}`;
  return {
    /** Hash: breaker state per key (issue 4). */
    breaker: (key: string) => `${base}:breaker:${key}`,
    /** Sorted set / hash: breaker window buckets. */
    breakerWindow: (key: string) => `${base}:breaker-window:${key}`,
    /** Pub/sub channel for breaker transitions. */
    breakerChannel: `${base}:breaker-events`,
    /** Hash: the retry budget's token bucket. */
    budget: `${base}:budget`,
    /** Hash: disabled webhook endpoints. */
    disabledEndpoints: `${base}:disabled-endpoints`,
    /** Hash: cursors of interrupted DLQ replays and purges. */
    dlqCursor: `${base}:dlq-cursor`,
    /** The pattern that matches every one of these keys. */
    pattern: `${base}:*`,
  };
}
