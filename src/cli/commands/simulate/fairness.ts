import { z } from 'zod';
import {
  checkFairnessWork,
  dispatchModes,
  simulateFairness,
  type FairnessParams,
} from '../../../simulate/fairness.js';
import type { SimStrategy } from '../../../simulate/sim-strategy.js';
import { CliUsageError } from '../../cli-error.js';
import { flagOf } from '../plan.js';
import { listFlag, numberFlag, parseScenarioFlags } from './flags.js';
import type { ScenarioRun } from './scenario.js';

/** `--scenario fairness`'s flags. */
export const fairnessFlags = z.object({
  concurrency: numberFlag('jobs the worker pool runs at once', 16, {
    integer: true,
    min: 1,
    max: 10_000,
  }),
  bigJobs: numberFlag('jobs of the backlogged key, there at the start', 50_000, {
    integer: true,
    min: 0,
    max: 5_000_000,
  }),
  smallKeys: numberFlag('other keys', 10, { integer: true, min: 1, max: 100_000 }),
  smallJobs: numberFlag('jobs per other key', 100, { integer: true, min: 1, max: 1_000_000 }),
  smallAtMs: numberFlag("when the other keys' jobs arrive", 1000, { min: 0, max: 3_600_000 }),
  serviceMs: numberFlag('mean time a job takes (uniform from half to 1.5 times it)', 100, {
    above: 0,
    max: 3_600_000,
  }),
  dispatch: listFlag('dispatch orders', dispatchModes),
});

/** Runs `--scenario fairness` from its flags. */
export async function runFairness(
  flags: Record<string, unknown>,
  seed: number,
  strategies: SimStrategy[] | undefined,
  json: boolean,
): Promise<ScenarioRun> {
  if (strategies !== undefined)
    throw new CliUsageError(
      '--strategies: not for --scenario fairness (no retries; see --dispatch)',
    );
  if (flags.svg !== undefined) throw new CliUsageError('--svg: not for --scenario fairness');
  const { dispatch, ...rest } = parseScenarioFlags(fairnessFlags, flags);
  const params: FairnessParams = { seed, ...rest };
  checkFairnessWork(params, dispatch.length, flagOf);
  const run = simulateFairness(dispatch, params);
  const { fairnessJson, fairnessTable } = await import('./fairness-report.js');
  return {
    output: json ? fairnessJson(params, run) : fairnessTable(params, run),
    svg: () => Promise.reject(new Error('fairness has no plot')),
  };
}
