import type { StreamError } from './retry-job.js';

/**
 * The events a stream consumer emits, by name. Each comes after what it
 * announces is stored (an entry's once its XACK is), through `safeEmit`: a
 * listener that throws or rejects is logged and changes nothing.
 */
export interface StreamConsumerEvents {
  /** The handler succeeded on the stream attempt and the entry is acknowledged. */
  'message:processed': [event: { stream: string; id: string; deliveries: number }];
  /** The stream attempt failed, the retry job is stored and the entry acknowledged. */
  'message:handed-off': [
    event: { stream: string; id: string; jobId: string; deliveries: number; error: StreamError },
  ];
  /** A reclaimed entry had been handed off before its consumer stopped: acknowledged without a run. */
  'message:already-handed-off': [event: { stream: string; id: string; jobId: string }];
  /** Entries acknowledged in one XACK. */
  'messages:acked': [event: { stream: string; ids: string[] }];
  /** Entries taken over from consumers that left them idle (XAUTOCLAIM). */
  'messages:claimed': [event: { stream: string; ids: string[] }];
  /** An error the consumer could not hand to anyone else (lost connection, failed hand-off). */
  error: [error: Error];
}
