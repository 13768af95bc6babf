import type { RedisClient } from '../../redis/connection.js';
import { newJobId } from '../../util/system.js';
import { keepsItsId, replayIdFor } from '../job-id.js';
import type { ReplayRef } from '../bullmq/job-moves.js';
import { metaKey } from './dead-record.js';

/**
 * The ids a replay gives dead records ({@link replayIdFor}), each with a
 * fresh id in case that one is taken. Only a record whose own id it cannot
 * keep has its key read (one round trip for the batch); a death replaced
 * meanwhile is fenced out by the replay script's generation check.
 */
export async function replayRefs(
  redis: RedisClient,
  deadRecordPrefix: string,
  refs: readonly { id: string; gen: string }[],
): Promise<ReplayRef[]> {
  const odd = refs.filter((ref) => !keepsItsId(ref.id));
  const pipeline = redis.pipeline();
  for (const ref of odd) pipeline.hget(deadRecordPrefix + ref.id, 'opts');
  const opts = odd.length > 0 ? ((await pipeline.exec()) ?? []) : [];
  const keys = new Map(odd.map((ref, i) => [ref.id, metaKey(opts[i]?.[1])]));
  return refs.map(({ id, gen }) => {
    const freshId = newJobId();
    return { id, gen, want: replayIdFor(id, keys.get(id), freshId), freshId };
  });
}
