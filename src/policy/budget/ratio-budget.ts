import {
  addToWindow,
  emptyWindow,
  geometryFor,
  windowSums,
  type WindowGeometry,
  type WindowHash,
} from '../window.js';

/**
 * The ratio retry budget as a pure state machine: the spec that
 * `src/redis/lua/ratioBudget-1.lua` implements in Redis for the whole fleet
 * (a model test runs both side by side). Requests (`q`) and granted retries
 * (`r`) are counted in a sliding window (`../window.ts`); a retry is granted
 * while `retries + 1 <= max(minRetries, ratio × requests)`.
 * @see Google's SRE book, "Handling Overload", the per-client retry budget
 */

/** The window the ratio budget keeps: always 10 buckets of `windowMs / 10`. */
export const ratioBuckets = 10;

/** What the rule needs of the options. */
export interface RatioRule {
  readonly ratio: number;
  readonly minRetries: number;
}

/** The budget's state: its window as stored. */
export type RatioBudgetState = WindowHash;

/** The budget's counts at one moment. */
export interface RatioCounts {
  readonly requests: number;
  readonly retries: number;
}

/** The result of asking for a retry. */
export interface RatioTake extends RatioCounts {
  readonly state: RatioBudgetState;
  readonly granted: boolean;
}

/** A budget with nothing counted. */
export const emptyRatioBudget: RatioBudgetState = emptyWindow;

/** The geometry a ratio budget of `windowMs` proposes for a new window. */
export function ratioGeometry(windowMs: number): WindowGeometry {
  return geometryFor(windowMs, ratioBuckets);
}

/** Requests and retries in the window at `nowMs`. */
export function ratioCounts(state: RatioBudgetState, nowMs: number): RatioCounts {
  const sums = windowSums(state, nowMs);
  return { requests: sums.q ?? 0, retries: sums.r ?? 0 };
}

/** Whether one more retry fits the rule. */
export function allowsRetry(counts: RatioCounts, rule: RatioRule): boolean {
  return counts.retries + 1 <= Math.max(rule.minRetries, rule.ratio * counts.requests);
}

/** Counts `requests` finished attempts at `nowMs`. */
export function settleRatio(
  state: RatioBudgetState,
  requests: number,
  nowMs: number,
  proposed: WindowGeometry,
): RatioBudgetState {
  return addToWindow(state, nowMs, proposed, { q: requests });
}

/** Asks for one retry at `nowMs`; a granted one is counted. */
export function takeRatio(
  state: RatioBudgetState,
  nowMs: number,
  rule: RatioRule,
  proposed: WindowGeometry,
): RatioTake {
  // Asking prunes the window even when it grants nothing, as the script does.
  const pruned = addToWindow(state, nowMs, proposed, {});
  const counts = ratioCounts(pruned, nowMs);
  if (!allowsRetry(counts, rule)) return { state: pruned, granted: false, ...counts };
  return {
    state: addToWindow(pruned, nowMs, proposed, { r: 1 }),
    granted: true,
    requests: counts.requests,
    retries: counts.retries + 1,
  };
}
