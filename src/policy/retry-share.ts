/**
 * The bounded share of due retries that a worker moves to the front of the
 * wait list, as a credit: every job the worker fetches earns `share`, every
 * retry moved to the front spends 1, and unspent credit fades with time
 * constant `windowMs`. So retries moved to the front are at most `share` of
 * the jobs fetched over any long stretch (new work keeps the rest of the
 * slots however many retries fall due), and a burst of retries after a calm
 * stretch may go first up to what the worker earned over about the last
 * `windowMs` (`share` × its rate × `windowMs` at most). The credit is
 * explicit state, so the arithmetic is tested without a worker or a clock.
 */
export interface RetryShare {
  /** Credit earned per job fetched, in (0, 1]. */
  readonly share: number;
  /** The time constant unspent credit fades with (ms). */
  readonly windowMs: number;
}

/** The credit `elapsedMs` later, nothing earned or spent meanwhile. */
export function fadeCredit(rule: RetryShare, credit: number, elapsedMs: number): number {
  return elapsedMs <= 0 ? credit : credit * Math.exp(-elapsedMs / rule.windowMs);
}

/** The credit after `fetched` more jobs were fetched. */
export function earnCredit(rule: RetryShare, credit: number, fetched: number): number {
  return credit + fetched * rule.share;
}

/** How many retries may be moved to the front now: the whole part of the credit. */
export function spendableJobs(credit: number): number {
  return Math.max(0, Math.floor(credit));
}

/**
 * The credit once `reserved` jobs (taken off `credit` when they were offered
 * to the script) came back with `moved` of them moved: the rest is given back.
 */
export function settleCredit(credit: number, reserved: number, moved: number): number {
  return credit + Math.max(0, reserved - moved);
}

/**
 * How long the credit for one more retry takes to earn at `fetchedPerMs`
 * jobs fetched per ms (ms; 0 when the rate is not known or nil): a due
 * retry the credit does not cover yet is held about this long per retry
 * ahead of it, rather than re-examined by every run until then.
 */
export function msPerCredit(rule: RetryShare, fetchedPerMs: number): number {
  return fetchedPerMs > 0 ? 1 / (rule.share * fetchedPerMs) : 0;
}
