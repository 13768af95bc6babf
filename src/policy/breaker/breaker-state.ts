import { z } from 'zod';
import { closedState, type BreakerState } from './breaker.js';

/**
 * The breaker's state as stored in Redis (`s` of the breaker hash, JSON)
 * and published to workers, validated on the way back out: one schema per
 * phase, each with only the fields that phase uses. The JSON is the one
 * earlier versions wrote, and fields they left out take the values a new
 * breaker has, so every stored state stays readable.
 */

const ms = z.number().finite();

/** Fields every phase carries, defaulted as in {@link closedState}. */
const shared = {
  trips: z.number().int().min(0).default(0),
  probes: z.record(z.string(), ms).default({}),
  probeSuccesses: z.number().int().min(0).default(0),
  probeFailures: z.number().int().min(0).optional(),
};

/** A breaker state of any phase; unknown fields are dropped. */
export const breakerStateSchema = z.discriminatedUnion('phase', [
  z.object({ phase: z.literal('closed'), ...shared }),
  z.object({
    phase: z.literal('open'),
    openedAt: ms.optional(),
    /** Absent while isolated. */
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
]);

/** A state as the schema reads it: one shape per phase, assignable to {@link BreakerState}. */
export type StoredBreakerState = z.output<typeof breakerStateSchema>;

/** Validates a state already parsed from JSON; `undefined` when it is not one. */
export function toBreakerState(value: unknown): BreakerState | undefined {
  const parsed = breakerStateSchema.safeParse(value);
  return parsed.success ? parsed.data : undefined;
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
