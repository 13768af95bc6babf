/** A stream entry's fields as Redis returns them: flat field/value strings. */
export type StreamFields = Record<string, string>;

/**
 * One stream entry as a handler sees it, whether the stream consumer runs it
 * (attempt 1) or the retry worker does (attempts 2, 3, …).
 */
export interface StreamMessage<F = StreamFields> {
  /** The stream the entry was read from. */
  readonly stream: string;
  /** The consumer group that read it. */
  readonly group: string;
  /** The entry's stream id (`1700000000000-0`). */
  readonly id: string;
  /** The entry's fields, parsed by the `schema` option when one is given. */
  readonly fields: F;
  /**
   * 1-based attempt number: 1 is the run from the stream, 2 and later are
   * the retries the requeue worker schedules. A replay from the DLQ starts
   * again at 1.
   */
  readonly attempt: number;
  /**
   * How many times Redis had delivered the entry to a consumer of the group
   * when the stream attempt ran (XPENDING's delivery count). Above 1 the
   * entry was reclaimed from a consumer that stopped without acknowledging it.
   */
  readonly deliveries: number;
  /** Aborted when the process is closing with a deadline. */
  readonly signal: AbortSignal;
}

/** Processes one stream entry; throw to have it retried (or dead-lettered) by requeue. */
export type StreamHandler<F = StreamFields> = (message: StreamMessage<F>) => Promise<void>;
