/**
 * The server of seed 004: it answers in `minDelayMs` while at most
 * `concurrencyLimit` requests are in flight, and in
 * `minDelayMs · latencyFactor^((concurrency − concurrencyLimit) / latencyK)`
 * beyond, re-evaluated as the concurrency changes.
 * @see seed 004 (smira, "Exponential Backoff or how not to crash a server")
 */
export interface ServerModel {
  /** @defaultValue `100` */
  minDelayMs: number;
  /** @defaultValue `30` */
  concurrencyLimit: number;
  /** @defaultValue `1.05` */
  latencyFactor: number;
  /** @defaultValue `15` */
  latencyK: number;
  /** Connections a stopped server queues; beyond, a connection is not accepted. @defaultValue `1024` */
  backlog: number;
}

/** The server's answer time at `concurrency`. */
export function serverLatencyMs(concurrency: number, model: ServerModel): number {
  if (concurrency <= model.concurrencyLimit) return model.minDelayMs;
  return (
    model.minDelayMs *
    model.latencyFactor ** ((concurrency - model.concurrencyLimit) / model.latencyK)
  );
}
