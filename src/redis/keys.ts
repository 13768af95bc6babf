/**
 * Every Redis key and queue name requeue uses, built in one place. requeue's
 * own keys put the queue name in a hash tag so that all of one queue's state
 * lands in one Redis Cluster slot.
 */

/** The default BullMQ key prefix, as BullMQ itself has it. */
export const defaultBullPrefix = 'bull';

/**
 * Whether Redis Cluster hashes `text` by a tag inside it: Redis takes the
 * part between the first `{` and the first `}` after it, if that part is not
 * empty.
 */
export function hasHashTag(text: string): boolean {
  const open = text.indexOf('{');
  return open >= 0 && text.indexOf('}', open + 1) > open + 1;
}

/**
 * The hash tag of a queue's keys: the queue's own name when it carries a tag
 * (`{orders}` or `jobs:{orders}`), so that requeue's keys share a Redis
 * Cluster slot with BullMQ's `bull:{orders}:…`; else `{<name>}` (its braces
 * percent-encoded when it starts with `}`).
 */
export function queueHashTag(queue: string): string {
  if (hasHashTag(queue)) return queue;
  // `{}a}` would be an empty tag, which Redis ignores: every key of the queue
  // would hash by its whole name, into different slots.
  return queue.startsWith('}') ? `{${queue.replace(/[{}]/g, encodeURIComponent)}}` : `{${queue}}`;
}

/**
 * BullMQ's key prefix for queue `queue`: BullMQ's keys are
 * `<prefix>:<queue>:<suffix>`. On one Redis, and on a Cluster when the name
 * carries its own hash tag, it is `prefix` itself (`bull:orders:wait`), the
 * layout BullMQ users know. On a Cluster a plain name gets its tag in the
 * prefix (`bull:{orders}:orders:wait`), so a queue's BullMQ keys share one
 * slot with each other and with requeue's `requeue:{orders}:…`, and plain
 * names work unchanged. Every Queue, Worker and key name is built from this.
 */
export function bullPrefix(queue: string, cluster: boolean, prefix = defaultBullPrefix): string {
  return cluster && !hasHashTag(queue) ? `${prefix}:${queueHashTag(queue)}` : prefix;
}

/** Keys of requeue's own state for one queue. */
export function requeueKeys(queue: string, prefix = 'requeue') {
  const base = `${prefix}:${queueHashTag(queue)}`;
  return {
    /** Sorted set: the DLQ's index, dead job ids scored by their death time (ms). */
    dead: `${base}:dead`,
    /** Prefix of the dead records: hash `<prefix><id>`, the job's hash renamed at its death. */
    deadRecordPrefix: `${base}:dead:`,
    /** Counter: death generations, one per death; fences replay and purge. */
    deadSequence: `${base}:dead-seq`,
    /** String: the token of the DLQ retention pass running, one at a time for the fleet. */
    deadTrimLock: `${base}:dead-trim-lock`,
    /** Hash: a breaker's state (`s`, JSON) and its version (`v`), per breaker key. */
    breaker: (key: string) => `${base}:breaker:${key}`,
    /**
     * Hash: a breaker's window: `<bucketStartMs>:t` and `:f` counters, its
     * geometry `g`, and `cf` (failures in a row). @see src/policy/window.ts
     */
    breakerWindow: (key: string) => `${base}:breaker-window:${key}`,
    /** Set: breaker keys that are not closed, so a starting worker can load them; expires when idle. */
    breakerOpenKeys: `${base}:breaker-open`,
    /** Set: breaker keys isolated by hand (forced open); never expires. */
    breakerIsolatedKeys: `${base}:breaker-isolated`,
    /** Set: breaker keys seen before keys expired when idle (read only now; `breakerSeenKeys` replaced it). */
    breakerKnownKeys: `${base}:breaker-known`,
    /**
     * Sorted set: breaker keys seen, scored by their last record (ms);
     * trimmed of keys idle past the breaker's `idleMs`, and gone when all are.
     */
    breakerSeenKeys: `${base}:breaker-seen`,
    /** Prefix of the breaker state hashes (`breaker` above), for the record script's trim. */
    breakerPrefix: `${base}:breaker:`,
    /** Pub/sub channel for breaker transitions. */
    breakerChannel: `${base}:breaker-events`,
    /** Hash: the retry budget's token bucket (`tokens`, `denied`). */
    budget: `${base}:budget`,
    /**
     * Hash: the ratio budget's window: `<bucketStartMs>:q` requests and `:r`
     * retries, and its geometry `g`. @see src/policy/window.ts
     */
    budgetWindow: `${base}:budget-window`,
    /** Hash: keys paused until a time (a 429's `Retry-After`), key → ms since epoch. */
    pausedKeys: `${base}:paused`,
    /** Pub/sub channel for pauses. */
    pauseChannel: `${base}:pause-events`,
    /**
     * Sorted set: fair dispatch's finish tag per dispatch key (member = key,
     * score = virtual time), only for keys with jobs waiting; dropped when
     * BullMQ's 'prioritized' set drains. @see src/redis/lua/includes/fairStamp.lua
     */
    fair: `${base}:fair`,
    /**
     * Sorted set: keys with adaptive-concurrency state, scored by when that
     * state may last be touched (ms); pruned by writers. @see limit-store.ts
     */
    limitKeys: `${base}:limit-keys`,
    /** Hash: a key's learned limit (`l`), slow-start threshold (`t`), last decrease (`d`). */
    limit: (key: string) => `${base}:limit:${key}`,
    /** Sorted set: a key's leases under its limit, token → expiry (ms). */
    limitLeases: (key: string) => `${base}:limit-leases:${key}`,
    /**
     * Sorted set: keys with parked jobs (their bulkhead or limit full), scored
     * by when their list was last touched (ms). @see src/scheduler/bullmq/key-parking.ts
     */
    parkedKeys: `${base}:parked`,
    /** List: a key's parked job ids, oldest first; removed when empty. */
    parkedPrefix: `${base}:parked:`,
    /**
     * String: the id of the deepest due retry the promoter moved to the front
     * of the wait list, so the next run's go behind the ones not fetched yet.
     * One per queue, overwritten. @see src/redis/lua/promoteRetries-7.lua
     */
    retryTail: `${base}:retry-tail`,
    /** Hash: registered webhook endpoints, id → record JSON. @see endpoint-registry.ts */
    endpoints: `${base}:endpoints`,
    /** String: a key's rate-limit TAT (ms), expiring once past. @see lua/rateReserve-1.lua */
    rate: (key: string) => `${base}:rate:${key}`,
    /** String: when a webhook endpoint's failing streak began (ms); expires with auto-disable's `afterMs`. */
    failingSince: (endpointId: string) => `${base}:failing:${endpointId}`,
    /** Hash: disabled webhook endpoints. */
    disabledEndpoints: `${base}:disabled-endpoints`,
    /** The pattern that matches every one of these keys. */
    pattern: `${base}:*`,
  };
}

/**
 * Keys of a webhook queue's delivery log (`workers/webhook/delivery-log.ts`),
 * in the queue's slot. An entry's member in every index is
 * `<entryId> <endpointId> <messageId>` (ids have no spaces), so retention
 * finds every key an entry touches from the member alone.
 */
export function deliveryLogKeys(queue: string, prefix = 'requeue') {
  const base = `${prefix}:${queueHashTag(queue)}:dlog`;
  return {
    /** The prefix the retention script builds the other keys from. */
    base: `${base}:`,
    /** Sorted set: every entry's member, scored by its attempt's start (ms). */
    index: base,
    /** String: one attempt as JSON, expiring with the retention. */
    entry: (entryId: string) => `${base}:e:${entryId}`,
    /** Sorted set: the entries of one message (event id), scored by time. */
    byMessage: (messageId: string) => `${base}:m:${messageId}`,
    /** Sorted set: the entries of one endpoint, scored by time. */
    byEndpoint: (endpointId: string) => `${base}:p:${endpointId}`,
    /** String: the token of the retention pass running, one at a time for the fleet. */
    trimLock: `${base}-trim-lock`,
  };
}
