import type { RedisClient } from '../../src/redis/connection.js';
import { requeueKeys } from '../../src/redis/keys.js';
import type { DeadJobRecord } from '../../src/scheduler/dlq/dead-letter-queue.js';

/**
 * Stores a dead record as the dead-letter script would (the job's hash,
 * renamed, with its death), for tests of the DLQ's own operations. Returns
 * the record's generation.
 */
export async function seedDead(
  redis: RedisClient,
  record: Omit<DeadJobRecord, 'gen' | 'source'> & { source: string },
): Promise<string> {
  const keys = requeueKeys(record.source);
  const gen = String(await redis.incr(keys.deadSequence));
  const death = {
    reason: record.reason,
    message: record.message,
    attempts: record.attempts,
    deadAt: record.deadAt,
    ...(record.firstFailedAt !== undefined ? { firstFailedAt: record.firstFailedAt } : {}),
  };
  const opts =
    record.idempotencyKey !== undefined
      ? { ...record.opts, rq: { key: record.idempotencyKey } }
      : record.opts;
  await redis
    .multi()
    .del(keys.deadRecordPrefix + record.id)
    .hset(keys.deadRecordPrefix + record.id, {
      name: record.name,
      data: JSON.stringify(record.data),
      opts: JSON.stringify(opts),
      timestamp: record.deadAt,
      ats: record.attempts,
      rq: JSON.stringify({ v: 1, history: record.history, life: record.replays, deferrals: 0 }),
      rql: record.replays,
      gen,
      dead: JSON.stringify(death),
    })
    .zadd(keys.dead, record.deadAt, record.id)
    .exec();
  return gen;
}
