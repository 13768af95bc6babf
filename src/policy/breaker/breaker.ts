import { computeDelay } from '../backoff/index.js';
import type { BreakerOptions } from './breaker-options.js';

/**
 * The circuit breaker as a pure state machine. The Redis adapter
 * (`src/redis/breaker-store.ts`) reads a state, asks these functions for the
 * next one, and writes it back with a compare-and-set, so that every worker of
 * the fleet sees one transition however many race for it.
 * @see cockatiel's `CircuitBreakerPolicy` for the states; seed 001 for why.
 */

/** A circuit's phase; `isolated` is opened by hand, shut until closed by hand (cockatiel's `Isolated`). */
export type BreakerPhase = 'closed' | 'open' | 'half-open' | 'isolated';

/** What a circuit counts in every phase. */
export interface BreakerCounts {
  /** Trips since the circuit was last closed: the open time grows with them. */
  trips: number;
  /** Probes in flight: probe id → when its lease ends. */
  probes: Record<string, number>;
  /** Probes that succeeded in this half-open period. */
  probeSuccesses: number;
  /** Probes that failed in this half-open period (only a ratio-closing breaker keeps going after one). */
  probeFailures?: number;
}

/**
 * A circuit's state: one shape per phase, each with the times that phase
 * has. Stored and published as `breaker-state.ts` writes it.
 */
export type BreakerState =
  | (BreakerCounts & { phase: 'closed' })
  | (BreakerCounts & {
      phase: 'open';
      /** When the circuit last opened. */
      openedAt?: number;
      /** When it starts letting probes through. */
      halfOpenAt: number;
    })
  | (BreakerCounts & {
      phase: 'half-open';
      openedAt?: number;
      /** When probing began; absent in a state stored without it (first tries probe at once). */
      halfOpenAt?: number;
    })
  | (BreakerCounts & {
      phase: 'isolated';
      /** When it was opened by hand. */
      openedAt?: number;
    });

/** The outcomes a window holds. */
export interface WindowStats {
  total: number;
  failures: number;
  /** Failures in a row, ending now. */
  consecutiveFailures: number;
}

/** A transition, for events and logs. */
export type BreakerTransition = 'opened' | 'half-open' | 'closed';

export interface Step<V = undefined> {
  state: BreakerState;
  transition?: BreakerTransition;
  verdict: V;
}

/** What a worker may do with a job, by the breaker. */
export type Admission =
  { kind: 'allow' } | { kind: 'probe'; probeId: string } | { kind: 'reject'; retryAt: number };

export function closedState(): BreakerState {
  return { phase: 'closed', trips: 0, probes: {}, probeSuccesses: 0 };
}

/**
 * How long the circuit stays open after its `trips`-th trip (1-based): the
 * exponential backoff strategy with `openMs` as base, `openFactor` as factor
 * (1 keeps it constant) and `maxOpenMs` as cap.
 */
export function openDuration(trips: number, options: BreakerOptions): number {
  return computeDelay(
    {
      strategy: 'exponential',
      baseMs: options.openMs,
      capMs: options.maxOpenMs,
      factor: options.openFactor,
      jitter: 0,
      randomMs: 0,
    },
    { retry: Math.max(0, trips - 1), random: noRandom },
  );
}

/** The exponential strategy draws no random number. */
const noRandom = (): number => 0;

function open(state: BreakerState, now: number, options: BreakerOptions): BreakerState {
  const trips = state.trips + 1;
  return {
    phase: 'open',
    openedAt: now,
    halfOpenAt: now + openDuration(trips, options),
    trips,
    probes: {},
    probeSuccesses: 0,
  };
}

/** Whether a closed circuit's window calls for it to open. */
export function shouldTrip(stats: WindowStats, options: BreakerOptions): boolean {
  if (
    options.consecutiveFailures !== undefined &&
    stats.consecutiveFailures >= options.consecutiveFailures
  ) {
    return true;
  }
  return (
    stats.total >= options.minimumRequests && stats.failures / stats.total >= options.failureRate
  );
}

/** A closed circuit looks at its window; only a closed one can trip this way. */
export function onWindow(
  state: BreakerState,
  stats: WindowStats,
  now: number,
  options: BreakerOptions,
): Step {
  if (state.phase !== 'closed' || !shouldTrip(stats, options)) return { state, verdict: undefined };
  return { state: open(state, now, options), transition: 'opened', verdict: undefined };
}

/**
 * May a job run now? Closed: yes. Open: not before the half-open time. Half
 * open: as a probe while fewer than `halfOpenProbes` are in flight fleet-wide
 * (an expired lease frees its slot); otherwise come back later. A breaker
 * that closes on a ratio (`halfOpenSuccessRatio` < 1) ramps up instead: one
 * probe, then one more in flight for each success, so a recovering
 * dependency gets traffic back gradually. A job's first attempt (`retry`
 * false) probes only `firstTryProbeDelayMs` after the half-open time: the
 * jobs that already failed go first, since whether their retries succeed
 * is what tells a flaky dependency from a down one.
 */
export function admit(
  state: BreakerState,
  now: number,
  probeId: string,
  options: BreakerOptions,
  retry = true,
): Step<Admission> {
  if (state.phase === 'closed') return { state, verdict: { kind: 'allow' } };
  // Isolated until closed by hand: ask again now and then, not every second.
  if (state.phase === 'isolated')
    return { state, verdict: { kind: 'reject', retryAt: now + options.isolatedRetryMs } };
  let next = state;
  let transition: BreakerTransition | undefined;
  if (state.phase === 'open') {
    if (now < state.halfOpenAt)
      return { state, verdict: { kind: 'reject', retryAt: state.halfOpenAt } };
    next = { ...state, phase: 'half-open', probes: {}, probeSuccesses: 0, probeFailures: 0 };
    transition = 'half-open';
  }
  // A half-open state stored without its half-open time lets first tries probe.
  const firstTriesAt =
    next.halfOpenAt === undefined ? now : next.halfOpenAt + options.firstTryProbeDelayMs;
  if (!retry && now < firstTriesAt) {
    const retryAt = Math.max(now + options.halfOpenRetryMs, firstTriesAt);
    return {
      state: next,
      ...(transition ? { transition } : {}),
      verdict: { kind: 'reject', retryAt },
    };
  }
  const live = Object.fromEntries(Object.entries(next.probes).filter(([, until]) => until > now));
  const decided = next.probeSuccesses + (next.probeFailures ?? 0);
  const ramp = options.halfOpenSuccessRatio < 1 ? 1 + next.probeSuccesses : Infinity;
  if (Object.keys(live).length >= Math.min(options.halfOpenProbes - decided, ramp)) {
    const retryAt = now + options.halfOpenRetryMs;
    return {
      state: { ...next, probes: live },
      ...(transition ? { transition } : {}),
      verdict: { kind: 'reject', retryAt },
    };
  }
  live[probeId] = now + options.probeTimeoutMs;
  return {
    state: { ...next, probes: live },
    ...(transition ? { transition } : {}),
    verdict: { kind: 'probe', probeId },
  };
}

/**
 * A probe's result. The half-open period decides on `halfOpenProbes`
 * probes: it closes when at least `halfOpenSuccessRatio` of them succeed, and
 * opens again (for longer if the open time grows) as soon as that can no
 * longer happen — with the default ratio of 1, at the first failure.
 */
export function onProbeResult(
  state: BreakerState,
  probeId: string,
  success: boolean,
  now: number,
  options: BreakerOptions,
): Step {
  if (state.phase !== 'half-open' || !(probeId in state.probes))
    return { state, verdict: undefined };
  const probes = { ...state.probes };
  delete probes[probeId];
  const probeSuccesses = state.probeSuccesses + (success ? 1 : 0);
  const probeFailures = (state.probeFailures ?? 0) + (success ? 0 : 1);
  const failuresAllowed = Math.floor(
    (1 - options.halfOpenSuccessRatio) * options.halfOpenProbes + 1e-9,
  );
  if (probeFailures > failuresAllowed)
    return { state: open(state, now, options), transition: 'opened', verdict: undefined };
  if (probeSuccesses + probeFailures >= options.halfOpenProbes)
    return { state: closedState(), transition: 'closed', verdict: undefined };
  return { state: { ...state, probes, probeSuccesses, probeFailures }, verdict: undefined };
}

/** Manual isolate: open until closed by hand. */
export function forceOpen(state: BreakerState, now: number): Step {
  // Already isolated: nothing changes, nothing to tell the workers.
  if (state.phase === 'isolated') return { state, verdict: undefined };
  const next: BreakerState = {
    phase: 'isolated',
    openedAt: now,
    trips: state.trips,
    probes: {},
    probeSuccesses: 0,
  };
  return {
    state: next,
    // Isolating a tripped circuit is a change too: workers must stop expecting a half-open time.
    transition: 'opened',
    verdict: undefined,
  };
}

/** Manual reset: closed, with a clean slate. */
export function forceClose(state: BreakerState): Step {
  return {
    state: closedState(),
    ...(state.phase !== 'closed' ? { transition: 'closed' as const } : {}),
    verdict: undefined,
  };
}
