import type { BrokerError } from './broker-error.js';

/**
 * The events an AMQP or JetStream consumer emits, by name. Each comes after
 * what it announces is stored (a message's once the broker has its ack),
 * through `safeEmit`: a listener that throws or rejects is logged and
 * changes nothing.
 */
export interface BrokerConsumerEvents {
  /** The handler succeeded on the broker attempt and the message is acknowledged. */
  'message:processed': [event: { source: string; id: string; deliveries: number }];
  /** The broker attempt failed, the hand-off job is stored and the message acknowledged. */
  'message:handed-off': [
    event: { source: string; id: string; jobId: string; deliveries: number; error: BrokerError },
  ];
  /** A redelivered message had been handed off before: acknowledged without a run. */
  'message:already-handed-off': [event: { source: string; id: string; jobId: string }];
  /** JetStream `nak` mode: the message goes back to the stream, due after `delayMs`. */
  'message:nacked': [event: { source: string; id: string; deliveries: number; delayMs: number }];
  /** The breaker opened: the consumer stopped taking deliveries. */
  'consumer:paused': [event: { source: string }];
  /** The breaker half-opened or closed: the consumer takes deliveries again. */
  'consumer:resumed': [event: { source: string }];
  /** An error the consumer could not hand to anyone else (lost connection, failed hand-off). */
  error: [error: Error];
}
