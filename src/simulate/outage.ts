import { OutageRun } from './outage/run.js';
import type { OutageParams, OutageResult } from './outage/parameters.js';
import type { SimStrategy } from './sim-strategy.js';
import { checkOutageWork } from './work-bound.js';
import { checkOutageClient } from './outage/seed004-client.js';

// The outage's parts have files of their own (src/simulate/outage/); their names stay importable from here.
export { serverLatencyMs, type ServerModel } from './server-model.js';
export {
  outageClients,
  recoveryOkFraction,
  recoveryWindowS,
  seed004Strategies,
  serverRecoveryWindowS,
  type OutageClient,
  type OutageParams,
  type OutageResult,
  type SecondStats,
} from './outage/parameters.js';
export {
  baselineOkPerSecond,
  offeredOkPerSecond,
  recoverySecond,
  serverRecoverySecond,
} from './outage/recovery.js';
export { seed004Delay } from './outage/seed004-client.js';

/** Runs the outage scenario (seed 004) for each strategy. */
export function simulateOutage(
  strategies: readonly SimStrategy[],
  params: OutageParams,
): OutageResult[] {
  checkOutageWork(params, strategies.length);
  checkOutageClient(params, strategies);
  return strategies.map((strategy) => new OutageRun(strategy, params).run());
}
