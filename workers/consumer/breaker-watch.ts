import { queueBreakerKey, type BreakerGate } from '../../src/scheduler/breaker-gate.js';
import type { TypedEmitter, WorkerEvents } from '../../src/scheduler/events.js';

/** What a broker consumer follows: a retry worker's breaker and its events. */
export type BreakerSource = TypedEmitter<WorkerEvents> & { readonly gate: BreakerGate };

/**
 * Whether the retry worker's queue-wide breaker is open (or isolated), by
 * its cached state: no round trip.
 */
export function breakerOpen(worker: BreakerSource): boolean {
  const state = worker.gate.stateOf(queueBreakerKey);
  return state !== undefined && (state.phase === 'open' || state.phase === 'isolated');
}

/**
 * Calls `pause` when the retry worker's queue-wide breaker opens and
 * `resume` when it half-opens or closes, so a broker consumer stops taking
 * deliveries while the dependency is down. Returns the unsubscribe.
 */
export function watchBreaker(
  worker: BreakerSource,
  hooks: { pause: () => void; resume: () => void },
): () => void {
  const onOpen = (e: { key: string }) => {
    if (e.key === queueBreakerKey) hooks.pause();
  };
  const onResume = (e: { key: string }) => {
    if (e.key === queueBreakerKey) hooks.resume();
  };
  worker.on('breaker:opened', onOpen);
  worker.on('breaker:half-open', onResume);
  worker.on('breaker:closed', onResume);
  if (breakerOpen(worker)) hooks.pause();
  return () => {
    worker.off('breaker:opened', onOpen);
    worker.off('breaker:half-open', onResume);
    worker.off('breaker:closed', onResume);
  };
}
