import type { RedisClient } from '../../src/redis/connection.js';
import * as commands from './stream-commands.js';
import type { Delivery } from './stream-commands.js';

/** Where a consumer's pending entries live: its stream, group and name, and when they count as idle. */
export interface PendingScope {
  stream: string;
  group: string;
  consumer: string;
  /** An entry pending this long without its consumer touching it is reclaimed, in ms. */
  claimIdleMs: number;
}

/**
 * The entries a consumer holds (delivered, not yet acknowledged or handed
 * back): while it holds any, a heartbeat resets their idle time a few times
 * per `claimIdleMs`, so live consumers keep theirs.
 */
export class HeldEntries {
  private readonly ids = new Set<string>();
  private heartbeat: NodeJS.Timeout | undefined;

  constructor(
    private readonly redis: RedisClient,
    private readonly scope: PendingScope,
    private readonly report: (err: unknown, message: string) => void,
  ) {}

  /** Holds a batch and starts the heartbeat. */
  hold(entries: readonly Delivery[]): void {
    for (const entry of entries) this.ids.add(entry.id);
    if (this.heartbeat) return;
    const { stream, group, consumer, claimIdleMs } = this.scope;
    this.heartbeat = setInterval(
      () => {
        const ids = [...this.ids];
        commands.touch(this.redis, { stream, group, consumer, ids }).catch((err: unknown) => {
          this.report(err, 'could not refresh held entries');
        });
      },
      Math.max(1, Math.floor(claimIdleMs / 3)),
    );
    this.heartbeat.unref();
  }

  /** Acknowledged entries: no longer held. */
  drop(ids: readonly string[]): void {
    for (const id of ids) this.ids.delete(id);
  }

  /** The batch is over: entries not acknowledged by now (a failed hand-off) go idle and are reclaimed. */
  clear(): void {
    clearInterval(this.heartbeat);
    this.heartbeat = undefined;
    this.ids.clear();
  }

  /** Hands unstarted entries back: idle enough to be claimed at once, delivery count unchanged. */
  async release(entries: readonly Delivery[]): Promise<void> {
    const { stream, group, consumer, claimIdleMs } = this.scope;
    const byCount = new Map<number, string[]>();
    for (const e of entries)
      byCount.set(e.deliveries, [...(byCount.get(e.deliveries) ?? []), e.id]);
    for (const [deliveries, ids] of byCount) {
      // Out of the held set first, so no later heartbeat makes them fresh again.
      this.drop(ids);
      await commands.touch(this.redis, {
        stream,
        group,
        consumer,
        ids,
        idleMs: claimIdleMs,
        retryCount: deliveries - 1,
      });
    }
  }
}

/**
 * One XAUTOCLAIM page of entries idle longer than `claimIdleMs`, now owned by
 * `consumer`, each with its delivery count; and where the next page starts
 * (`'0-0'` once the scan has wrapped).
 */
export async function claimIdle(
  redis: RedisClient,
  scope: PendingScope,
  start: string,
  count: number,
): Promise<{ next: string; entries: Delivery[] }> {
  const { stream, group, consumer, claimIdleMs } = scope;
  const page = await commands.autoClaim(redis, {
    stream,
    group,
    consumer,
    minIdleMs: claimIdleMs,
    start,
    count,
  });
  const first = page.entries[0];
  const last = page.entries[page.entries.length - 1];
  if (!first || !last) return { next: page.next, entries: [] };
  const counts = await commands.deliveryCounts(redis, {
    stream,
    group,
    consumer,
    first: first.id,
    last: last.id,
    count: page.entries.length + count,
  });
  // Missing from XPENDING (it cannot be, short of a race): assume a redelivery, which only
  // adds the check for an earlier hand-off.
  return {
    next: page.next,
    entries: page.entries.map((e) => ({ ...e, deliveries: counts.get(e.id) ?? 2 })),
  };
}
