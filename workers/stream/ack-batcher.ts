/**
 * Acknowledges stream entries in batches: one XACK in flight at a time,
 * carrying every entry finished meanwhile. What an entry's outcome announces
 * is announced only once its XACK is stored, so a listener never sees an
 * entry that could still be delivered again because of what it did.
 */
export class AckBatcher {
  private readonly waiting: string[] = [];
  /** Per entry, what to announce once its acknowledgement is stored. */
  private readonly announcements = new Map<string, () => void>();
  private flight: Promise<void> | undefined;

  /**
   * @param send - sends one XACK for `ids`; rejects if Redis did not store it.
   * @param acked - called after each stored XACK, before its entries' announcements (it must
   *   not throw: emit with `safeEmit`).
   */
  constructor(
    private readonly send: (ids: string[]) => Promise<void>,
    private readonly acked: (ids: string[]) => void,
  ) {}

  /**
   * Queues `id`'s acknowledgement; `announce` runs once it is stored. Never
   * throws: a failed XACK keeps its ids for the next flush (or, if none
   * comes, the entry goes idle and is reclaimed, announced by whoever
   * acknowledges it then).
   */
  ack(id: string, announce?: () => void): void {
    this.waiting.push(id);
    if (announce) this.announcements.set(id, announce);
    void this.flush().catch(() => undefined);
  }

  /** Sends what waits; rejects if an XACK fails (its ids wait for the next flush). */
  flush(): Promise<void> {
    if (this.flight) return this.flight;
    if (this.waiting.length === 0) return Promise.resolve();
    // sendAll awaits before it clears `flight`, so this assignment comes first.
    this.flight = this.sendAll();
    return this.flight;
  }

  /** Flushes until nothing waits, the flights started meanwhile included. */
  async drain(): Promise<void> {
    while (this.flight || this.waiting.length > 0) await this.flush();
  }

  private async sendAll(): Promise<void> {
    try {
      while (this.waiting.length > 0) {
        const ids = this.waiting.splice(0);
        try {
          await this.send(ids);
        } catch (err) {
          this.waiting.unshift(...ids);
          throw err;
        }
        this.acked(ids);
        for (const id of ids) {
          const announce = this.announcements.get(id);
          this.announcements.delete(id);
          announce?.();
        }
      }
    } finally {
      // In the same synchronous step as the last check: an ack queued after it starts a new flight.
      this.flight = undefined;
    }
  }
}
