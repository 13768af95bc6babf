import { sleep } from '../../util/lifecycle.js';
import type { Clock } from '../../util/system.js';
import type { DeadRef } from './dead-record.js';

/** Progress of a bulk operation. */
export interface BulkProgress {
  done: number;
  total: number;
}

export interface BulkOptions {
  /** Replay at most this many jobs per second (SQS's MaxNumberOfMessagesPerSecond). */
  ratePerSec?: number;
  onProgress?: (progress: BulkProgress) => void;
  signal?: AbortSignal;
  /** Jobs per round trip. @defaultValue `500` */
  batchSize?: number;
}

/**
 * Runs `apply` over the deaths `scan` yields, as they were at the start (the
 * scan is read whole first), in batches, at most `ratePerSec`, until done or
 * `signal` aborts; `apply` returns how many of a batch it handled.
 */
export async function runBulk(
  scan: AsyncIterable<DeadRef>,
  options: BulkOptions,
  clock: Clock,
  apply: (refs: DeadRef[]) => Promise<number>,
): Promise<BulkProgress> {
  const snapshot: DeadRef[] = [];
  for await (const ref of scan) snapshot.push(ref);
  const progress: BulkProgress = { done: 0, total: snapshot.length };
  options.onProgress?.({ ...progress });
  const batchSize = Math.max(1, Math.min(options.batchSize ?? 500, options.ratePerSec ?? Infinity));
  const startedAt = clock.now();
  let handled = 0;
  for (let i = 0; i < snapshot.length && !options.signal?.aborted; i += batchSize) {
    const batch = snapshot.slice(i, i + batchSize);
    progress.done += await apply(batch);
    handled += batch.length;
    options.onProgress?.({ ...progress });
    if (options.ratePerSec !== undefined) {
      const dueAt = startedAt + (handled / options.ratePerSec) * 1000;
      const waitMs = dueAt - clock.now();
      if (waitMs > 0) await sleep(waitMs, options.signal);
    }
  }
  return progress;
}
