/**
 * A retry's delay and due time, in whole milliseconds: BullMQ keeps a delayed
 * job's due time as a whole millisecond (its score is `dueAtMs · 0x1000 + n`)
 * and a job starts on a whole-millisecond clock, so a due time carrying a
 * fraction would be a promise the queue cannot keep (it fell due up to half a
 * millisecond before the recorded `retryAt`). Every due time requeue computes
 * from a delay goes through here.
 * @param now - ms since the epoch, a whole number (a clock's reading)
 * @param delayMs - any delay ≥ 0; a fraction is rounded to the nearest millisecond
 */
export function dueAfter(now: number, delayMs: number): { delayMs: number; retryAt: number } {
  const whole = Math.max(0, Math.round(delayMs));
  return { delayMs: whole, retryAt: now + whole };
}

/** The first whole millisecond not before `at`: a due time never earlier than asked. */
export function dueNotBefore(at: number): number {
  return Math.ceil(at);
}
