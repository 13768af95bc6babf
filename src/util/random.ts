import type { Random } from './system.js';

/**
 * A seeded PRNG (mulberry32): fast, 32-bit state, good enough for jitter and
 * for statistical tests that must be repeatable.
 * @see https://gist.github.com/tommyettinger/46a874533244883189143505d203312c
 */
export function seededRandom(seed: number): Random {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A uniform number in `[min, max)`; `max <= min` gives `min`. */
export function uniform(random: Random, min: number, max: number): number {
  return max <= min ? min : min + random() * (max - min);
}

/**
 * A standard normal variate by the Box-Muller transform (seed 004's
 * `norm_variate`). Consumes two uniforms per call.
 */
export function standardNormal(random: Random): number {
  // 1 - u keeps the argument of log in (0, 1].
  const u = 1 - random();
  const v = random();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
}
