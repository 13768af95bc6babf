import { z } from 'zod';
import type { RetryPolicy } from '../../../policy/retry-policy.js';
import type { ContentionParams } from '../../../simulate/contention.js';
import { checkContentionWork } from '../../../simulate/work-bound.js';
import { simStrategies, type SimStrategy } from '../../../simulate/sim-strategy.js';
import { flagOf } from '../plan.js';
import { numberFlag, parseScenarioFlags } from './flags.js';
import { policyFlags, policyFrom } from './policy-flags.js';
import type { ScenarioRun } from './scenario.js';

/** The clients' backoff options: the AWS study's. */
const policyDefaults: Partial<RetryPolicy> = { baseMs: 5, capMs: 2000 };

/** `--scenario contention`'s flags. */
export const contentionFlags = z.object({
  clients: numberFlag('clients', 100, { integer: true, min: 1, max: 10_000 }),
  trials: numberFlag('runs averaged', 100, { integer: true, min: 1, max: 100_000 }),
  netMeanMs: numberFlag('mean network delay per message', 10, { min: 0 }),
  netSdMs: numberFlag('its standard deviation', 2, { min: 0 }),
  ...policyFlags(policyDefaults),
});

/** Runs `--scenario contention` from its flags. */
export async function runContention(
  flags: Record<string, unknown>,
  seed: number,
  chosen: SimStrategy[] | undefined,
  json: boolean,
): Promise<ScenarioRun> {
  const strategies = chosen ?? [...simStrategies];
  const { clients, trials, netMeanMs, netSdMs, ...policy } = parseScenarioFlags(
    contentionFlags,
    flags,
  );
  const params: ContentionParams = {
    clients,
    trials,
    seed,
    netMeanMs,
    netSdMs,
    policy: policyFrom(policy, policyDefaults),
  };
  checkContentionWork(params, strategies.length, flagOf);
  // Loaded when run (not when the command starts): a process pays for one scenario.
  const [{ simulateContention }, { contentionJson, contentionTable }] = await Promise.all([
    import('../../../simulate/contention.js'),
    import('./contention-report.js'),
  ]);
  const results = simulateContention(strategies, params);
  return {
    output: json ? contentionJson(params, results) : contentionTable(params, results),
    svg: async () => (await import('../../simulate-svg.js')).contentionSvg(params, results),
  };
}
