/** The median of `values` (the mean of the middle two for an even count); NaN when empty. */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Jobs per second for `jobs` handled in `elapsedMs`. */
export function perSecond(jobs: number, elapsedMs: number): number {
  return elapsedMs > 0 ? (jobs * 1000) / elapsedMs : Number.POSITIVE_INFINITY;
}

/** `12,345` for a rate, `—` for NaN. */
export function formatRate(value: number): string {
  return Number.isFinite(value) ? Math.round(value).toLocaleString('en-US') : '—';
}

/** A ratio to two decimals, `—` for NaN. */
export function formatRatio(value: number): string {
  return Number.isFinite(value) ? value.toFixed(2) : '—';
}
