import type { JsMsg } from 'nats';

/**
 * Sends the `+ACK`s of successful messages together, once per turn of the
 * event loop (a `setImmediate`). The nats client writes what was queued in
 * one microtask checkpoint as one socket write; a consumer whose handlers
 * finish in different checkpoints would otherwise pay one write per ack.
 * An ack is fire-and-forget either way (JetStream redelivers what it never
 * got); this only delays it by one loop turn. `then` runs per message right
 * after its ack is written (the `message:processed` event).
 */
export class AckBatch {
  private msgs: JsMsg[] = [];
  private thens: ((() => void) | undefined)[] = [];
  private timer: NodeJS.Immediate | undefined;

  /** Queues `msg`'s ack; `then`, when given, runs after it is sent. */
  ack(msg: JsMsg, then?: () => void): void {
    this.msgs.push(msg);
    this.thens.push(then);
    this.timer ??= setImmediate(() => this.flush());
  }

  /** Sends every queued ack now (on close, before the connection is flushed). Never throws. */
  flush(): void {
    if (this.timer) clearImmediate(this.timer);
    this.timer = undefined;
    const msgs = this.msgs;
    const thens = this.thens;
    this.msgs = [];
    this.thens = [];
    for (let i = 0; i < msgs.length; i++) {
      try {
        msgs[i]!.ack();
      } catch {
        // The connection is gone: JetStream redelivers after ack_wait.
        continue;
      }
      thens[i]?.();
    }
  }
}
