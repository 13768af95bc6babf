import type { Random } from './system.js';

/**
 * A seeded PRNG (mulberry32): fast, 32-bit state, good enough for jitter and
 * for statistical tests that must be repeatable.
 * @see https://gist.github.com/tommyettinger/46a874533244883189143505d203312c
 */
export function seededRandom(seed: number): Random {
  const stream = new SeededStream(seed);
  return () => stream.next();
}

/**
 * {@link seededRandom}'s generator as an object, for a simulator's hot loop:
 * a call of {@link next} or {@link normal} on one class is inlined where a
 * call through a closure (a different one per stream) is not, so no draw is
 * boxed on the heap. The same seed gives the very numbers `seededRandom` gives.
 */
export class SeededStream {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** A uniform number in `[0, 1)`. */
  next(): number {
    return unit((this.state = (this.state + step) >>> 0));
  }

  /** A standard normal variate, as {@link standardNormal} draws it from this stream. */
  normal(): number {
    return boxMuller(this.next(), this.next());
  }

  /**
   * Fills `out` with the next `out.length` variates {@link normal} would
   * give, one after another: a tight loop whose state stays in a register.
   */
  fillNormals(out: Float64Array): void {
    let state = this.state;
    for (let i = 0; i < out.length; i++) {
      const u = unit((state = (state + step) >>> 0));
      const v = unit((state = (state + step) >>> 0));
      out[i] = boxMuller(u, v);
    }
    this.state = state;
  }
}

/** mulberry32's increment of its state per draw. */
const step = 0x6d2b79f5;

/** mulberry32's output for a state: a uniform number in `[0, 1)`. */
function unit(state: number): number {
  let t = Math.imul(state ^ (state >>> 15), state | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
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
  return boxMuller(random(), random());
}

/** Box-Muller from two uniforms in `[0, 1)`, `u` drawn first. */
function boxMuller(u: number, v: number): number {
  // 1 - u keeps the argument of log in (0, 1].
  return Math.sqrt(-2 * Math.log(1 - u)) * Math.cos(2 * Math.PI * v);
}
