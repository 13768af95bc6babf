/**
 * Where a key's limit stands `elapsedMs` after a 429 cut it from `peak` to
 * `backoffRatio` × `peak`: on CUBIC's concave curve, back at `peak` after
 * `recoveryMs` — quickly at first, slowly near the level that was throttled.
 * W(t) = peak × (1 − (1 − β)(1 − t/K)³), K = `recoveryMs`. CUBIC derives K
 * from a constant C (K = ∛(Wmax(1 − β)/C)); here K is stated and C follows,
 * so the curve needs no cube root and `limitRelease-3.lua` computes the same
 * double with the same four operations.
 * @see RFC 9438 §4.2 (CUBIC's window increase function)
 * @see AWS SDKs' adaptive retry mode (a client rate that recovers along CUBIC after a throttle)
 */
export function recoveredLimit(
  peak: number,
  elapsedMs: number,
  o: { readonly backoffRatio: number; readonly recoveryMs: number },
): number {
  if (elapsedMs >= o.recoveryMs) return peak;
  const left = 1 - Math.max(0, elapsedMs) / o.recoveryMs;
  return peak * (1 - (1 - o.backoffRatio) * left * left * left);
}
