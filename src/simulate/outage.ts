import { OutageRun } from './outage/run.js';
import type { OutageParams, OutageResult } from './outage/parameters.js';
import type { SimStrategy } from './sim-strategy.js';
import { checkOutageWork } from './work-bound.js';

// The outage's parts have files of their own (src/simulate/outage/); their names stay importable from here.
export { serverLatencyMs, type ServerModel } from './server-model.js';
export {
  recoveryOkFraction,
  recoveryWindowS,
  type OutageParams,
  type OutageResult,
  type SecondStats,
} from './outage/parameters.js';
export { baselineOkPerSecond, recoverySecond } from './outage/recovery.js';

/** Runs the outage scenario (seed 004) for each strategy. */
export function simulateOutage(
  strategies: readonly SimStrategy[],
  params: OutageParams,
): OutageResult[] {
  checkOutageWork(params, strategies.length);
  return strategies.map((strategy) => new OutageRun(strategy, params).run());
}
