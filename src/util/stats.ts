/** Order statistics and the mean of a sample. */
export interface Summary {
  min: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

/**
 * The `q`-quantile of ascending `sortedValues` by linear interpolation between
 * the closest ranks (Hyndman & Fan type 7, the default of R and NumPy):
 * `h = (n − 1) · q`, then interpolate between `sorted[⌊h⌋]` and `sorted[⌈h⌉]`.
 * @throws RangeError if the sample is empty or `q` is outside `[0, 1]`.
 */
export function quantile(sortedValues: ArrayLike<number>, q: number): number {
  const n = sortedValues.length;
  if (n === 0) throw new RangeError('quantile of an empty sample');
  if (!(q >= 0 && q <= 1)) throw new RangeError(`quantile q must be in [0, 1], got ${q}`);
  const h = (n - 1) * q;
  const lo = Math.floor(h);
  const hi = Math.min(lo + 1, n - 1);
  // lo and hi are in [0, n − 1], so both reads are defined.
  const below = sortedValues[lo]!;
  return below + (h - lo) * (sortedValues[hi]! - below);
}

/**
 * Min, p50, p90, p99, max (by {@link quantile}) and mean of `values`, which
 * are copied, not reordered.
 * @throws RangeError if `values` is empty.
 */
export function summarize(values: ArrayLike<number>): Summary {
  if (values.length === 0) throw new RangeError('summary of an empty sample');
  // A typed array sorts numerically (a plain array would sort as strings).
  const sorted = Float64Array.from(values).sort();
  let sum = 0;
  for (const value of sorted) sum += value;
  return {
    min: sorted[0]!,
    p50: quantile(sorted, 0.5),
    p90: quantile(sorted, 0.9),
    p99: quantile(sorted, 0.99),
    max: sorted[sorted.length - 1]!,
    mean: sum / sorted.length,
  };
}
