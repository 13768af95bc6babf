import { z } from 'zod';
import { limits } from './limits.js';

/**
 * Fair dispatch's inputs: a job's dispatch key and a key's weight. The
 * scheduling itself is start-time fair queuing, in Redis
 * (`src/redis/lua/includes/fairStamp.lua`): each key's jobs take turns with the
 * other keys' in proportion to the keys' weights.
 * @see P. Goyal, H. Vin, H. Cheng, "Start-time Fair Queueing", SIGCOMM 1996
 */

/** A dispatch key: 1–200 characters. */
export const dispatchKeySchema = z
  .string({ error: 'must be a string' })
  .min(1, `must be 1–${limits.dispatchKey} characters`)
  .max(limits.dispatchKey, `must be 1–${limits.dispatchKey} characters`);

/**
 * A key's weight: its share of the turns against the other keys waiting is
 * weight / Σ weights. 0 is refused (a key with no share would never run);
 * from 1/1000 to 1000, so the virtual time keeps its precision.
 */
export const dispatchWeightSchema = z
  .number({ error: 'must be a number' })
  .min(1 / limits.dispatchWeight, `must be a number from 0.001 to ${limits.dispatchWeight} (> 0)`)
  .max(limits.dispatchWeight, `must be a number from 0.001 to ${limits.dispatchWeight} (> 0)`);

/** A queue's weights per dispatch key (keys not named weigh 1). */
export const dispatchWeightsSchema = z
  .record(dispatchKeySchema, dispatchWeightSchema)
  .refine((weights) => Object.keys(weights).length <= limits.dispatchWeights, {
    message: `must name at most ${limits.dispatchWeights} keys`,
  });

/** The virtual time one job of a key with `weight` costs its key. */
export function dispatchCost(weight: number): number {
  return 1 / weight;
}
