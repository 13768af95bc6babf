import { z } from 'zod';
import { closedState, type BreakerPhase, type BreakerState } from './breaker.js';

/**
 * The breaker's state as stored in Redis (`s` of the breaker hash, JSON)
 * and published to workers, validated on the way back out: one schema per
 * phase, each with only the fields that phase uses. The JSON is the one
 * earlier versions wrote (`toStoredBreakerState`), and fields they
 * left out take the values a new breaker has, so every stored state stays
 * readable.
 */

const ms = z.number().finite();

/** Fields every phase carries, defaulted as in {@link closedState}. */
const shared = {
  trips: z.number().int().min(0).default(0),
  probes: z.record(z.string(), ms).default({}),
  probeSuccesses: z.number().int().min(0).default(0),
  probeFailures: z.number().int().min(0).optional(),
};

/**
 * A breaker state of any phase as stored or published, the forms earlier
 * versions wrote included (an isolated circuit as `open` with
 * `isolated: true`); unknown fields are dropped.
 */
export const breakerStateSchema = z.discriminatedUnion('phase', [
  z.object({ phase: z.literal('closed'), ...shared }),
  z.object({
    phase: z.literal('open'),
    openedAt: ms.optional(),
    /** Absent in the form earlier versions wrote for an isolated circuit. */
    halfOpenAt: ms.optional(),
    isolated: z.boolean().optional(),
    ...shared,
  }),
  z.object({
    phase: z.literal('half-open'),
    openedAt: ms.optional(),
    halfOpenAt: ms.optional(),
    ...shared,
  }),
  z.object({ phase: z.literal('isolated'), openedAt: ms.optional(), ...shared }),
]);

/** A state as stored and published (see `toStoredBreakerState`). */
export type StoredBreakerState = z.output<typeof breakerStateSchema>;

/** Validates a state already parsed from JSON; `undefined` when it is not one. */
export function toBreakerState(value: unknown): BreakerState | undefined {
  const parsed = breakerStateSchema.safeParse(value);
  if (!parsed.success) return undefined;
  const stored = parsed.data;
  if (stored.phase !== 'open') return stored;
  const { isolated, halfOpenAt, ...open } = stored;
  // An open circuit with no half-open time is isolated, as earlier versions read it.
  if (isolated === true || halfOpenAt === undefined) return { ...open, phase: 'isolated' };
  return { ...open, halfOpenAt };
}

/**
 * A state as it is stored and published: the form earlier versions wrote,
 * so that a worker not yet upgraded reads an isolated circuit as isolated
 * (`open`, `isolated: true`, no half-open time), not as an unreadable
 * state, which it would take for a closed one.
 */
export function toStoredBreakerState(state: BreakerState): StoredBreakerState {
  return state.phase === 'isolated' ? { ...state, phase: 'open', isolated: true } : state;
}

/** A phase as requeue shows it (CLI, admin API, metrics): an isolated circuit is `open`. */
export type ShownBreakerPhase = Exclude<BreakerPhase, 'isolated'>;

/**
 * A state as `requeue breaker status --json`, `requeue queues` and the admin
 * API show it: the phase as always (an isolated circuit `open`, marked
 * `isolated`), times in ms since the epoch, `halfOpenAt` only while open.
 */
export function breakerStateView(state: BreakerState): {
  state: ShownBreakerPhase;
  isolated: boolean;
  openedAt: number | null;
  halfOpenAt: number | null;
} {
  const isolated = state.phase === 'isolated';
  return {
    state: isolated ? 'open' : state.phase,
    isolated,
    openedAt: state.phase === 'closed' ? null : (state.openedAt ?? null),
    halfOpenAt: state.phase === 'open' ? state.halfOpenAt : null,
  };
}

/**
 * Reads the stored JSON. Nothing stored is a new, closed breaker; so is an
 * unreadable value, as before, since a breaker that cannot be read must not
 * stop the queue for good (the next trip writes a readable one).
 */
export function parseBreakerState(raw: string | null | undefined): BreakerState {
  if (!raw) return closedState();
  try {
    return toBreakerState(JSON.parse(raw)) ?? closedState();
  } catch {
    return closedState();
  }
}
