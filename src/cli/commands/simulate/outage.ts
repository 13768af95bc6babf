import { z } from 'zod';
import { parseBreakerOptions } from '../../../policy/breaker/breaker-options.js';
import { parseBudgetOptions } from '../../../policy/budget/budget-options.js';
import type { RetryPolicy } from '../../../policy/retry-policy.js';
import type { OutageParams } from '../../../simulate/outage.js';
import { outageClients, seed004Strategies } from '../../../simulate/outage/parameters.js';
import { CliUsageError } from '../../cli-error.js';
import { checkOutageWork } from '../../../simulate/work-bound.js';
import { parseAdaptiveConcurrency } from '../../../policy/limit/limit-options.js';
import { defaultRetryShare } from '../../../simulate/outage/dispatch.js';
import { simStrategies, type SimStrategy } from '../../../simulate/sim-strategy.js';
import { flagOf } from '../plan.js';
import { choiceFlag, jsonFlag, numberFlag, parseScenarioFlags, switchFlag } from './flags.js';
import { policyFlags, policyFrom } from './policy-flags.js';
import type { ScenarioRun } from './scenario.js';

/** The clients' backoff options: seed 004's. */
const policyDefaults: Partial<RetryPolicy> = {
  baseMs: 100,
  capMs: 300_000,
  factor: 2.718,
  jitter: 0.1,
};
/** …and with `--client seed004`, client.go's constants exactly (expFactor 2.71828). */
const seed004Defaults: Partial<RetryPolicy> = { ...policyDefaults, factor: 2.71828 };

/**
 * The default listen backlog: today's Linux, where Go's `Listen` asks for
 * `net.core.somaxconn` (4096 since Linux 5.4) and the kernel queues one more
 * connection than that. Seed 004's era (2015) had 128: `--backlog 129`.
 */
export const defaultBacklog = 4097;

const maxDurationMs = 3_600_000;

/** `--scenario outage`'s flags. */
export const outageFlags = z
  .object({
    clients: numberFlag('clients', 1000, { integer: true, min: 1, max: 200_000 }),
    meanGapMs: numberFlag("mean gap between a client's requests", 10_000, { above: 0 }),
    timeoutMs: numberFlag('client timeout', 2000, { above: 0 }),
    backlog: numberFlag(
      "connections a stopped server queues (Linux's somaxconn 4096, plus one); beyond, they keep dialling and land on resume",
      defaultBacklog,
      { integer: true, min: 0 },
    ),
    client: choiceFlag(
      "how clients retry: requeue's strategies, or seed004's client.go exactly (fixed, exponential)",
      outageClients,
      'requeue',
    ),
    stopAtMs: numberFlag('when the server stops', 15_000, { min: 0 }),
    stopForMs: numberFlag('for how long', 20_000, { min: 0 }),
    durationMs: numberFlag("the run's length", 180_000, { min: 1000, max: maxDurationMs }),
    minDelayMs: numberFlag('server latency under the limit', 100, { above: 0 }),
    concurrencyLimit: numberFlag('concurrency the server takes at min delay', 30, {
      integer: true,
      min: 0,
    }),
    latencyFactor: numberFlag('latency growth beyond the limit', 1.05, { min: 1 }),
    latencyK: numberFlag('extra requests per factor of latency', 15, { above: 0 }),
    breaker: jsonFlag('--breaker', "the workers' circuit breaker options, e.g. '{}'", (input) =>
      parseBreakerOptions(input),
    ),
    budget: jsonFlag('--budget', "the workers' retry budget options, e.g. '{}'", (input) =>
      parseBudgetOptions(input),
    ),
    protect: switchFlag(
      "also run each strategy with requeue's default protections: breaker, retry budget (--breaker/--budget or the workers' defaults), an adaptive (AIMD) limit on attempts in flight, due retries first",
    ),
    ...policyFlags(policyDefaults),
  })
  .superRefine((f, ctx) => {
    if (f.stopAtMs + f.stopForMs >= f.durationMs)
      ctx.addIssue({
        code: 'custom',
        path: ['durationMs'],
        message: `must be longer than --stop-at-ms + --stop-for-ms (${f.stopAtMs + f.stopForMs}), got ${f.durationMs}`,
      });
  });

/** Runs `--scenario outage` from its flags. */
export async function runOutage(
  flags: Record<string, unknown>,
  seed: number,
  chosen: SimStrategy[] | undefined,
  json: boolean,
): Promise<ScenarioRun> {
  const f = parseScenarioFlags(outageFlags, flags);
  const strategies = outageStrategies(f.client, chosen);
  const params: OutageParams = {
    clients: f.clients,
    seed,
    meanGapMs: f.meanGapMs,
    timeoutMs: f.timeoutMs,
    stopAtMs: f.stopAtMs,
    stopForMs: f.stopForMs,
    durationMs: f.durationMs,
    server: {
      minDelayMs: f.minDelayMs,
      concurrencyLimit: f.concurrencyLimit,
      latencyFactor: f.latencyFactor,
      latencyK: f.latencyK,
      backlog: f.backlog,
    },
    policy: policyFrom(f, f.client === 'seed004' ? seed004Defaults : policyDefaults),
    breaker: f.breaker,
    budget: f.budget,
    client: f.client,
  };
  const runs = f.protect ? [params, protectedParams(params)] : [params];
  checkOutageWork(params, strategies.length * runs.length, flagOf);
  // Loaded when run (not when the command starts): a process pays for one scenario.
  const [{ simulateOutage }, { outageJson, outageTable }] = await Promise.all([
    import('../../../simulate/outage.js'),
    import('./outage-report.js'),
  ]);
  // With --protect, each strategy's bare row, then its protected one.
  const byRun = runs.map((p) => simulateOutage(strategies, p));
  const results = strategies.flatMap((_, i) => byRun.map((rows) => rows[i]!));
  return {
    output: json
      ? outageJson(params, results, runs[1]?.protect && runs[1])
      : outageTable(params, results, runs[1]?.protect && runs[1]),
    svg: async () => (await import('../../simulate-svg.js')).outageSvg(params, results),
  };
}

/** The strategies to run: those asked for, or all the client has. */
function outageStrategies(
  client: (typeof outageClients)[number],
  chosen: SimStrategy[] | undefined,
): SimStrategy[] {
  if (client !== 'seed004') return chosen ?? [...simStrategies];
  if (chosen === undefined) return [...seed004Strategies];
  const other = chosen.find((s) => !(seed004Strategies as readonly string[]).includes(s));
  if (other !== undefined)
    throw new CliUsageError(
      `--strategies: --client seed004 retries by ${seed004Strategies.join(' or ')} only, got "${other}"`,
    );
  return chosen;
}

/**
 * The protected run: the breaker and budget given, or the workers' defaults,
 * plus the workers' adaptive limit at its defaults (src/policy/limit/) and
 * retry priority.
 */
function protectedParams(params: OutageParams): OutageParams {
  return {
    ...params,
    breaker: params.breaker ?? parseBreakerOptions({}),
    budget: params.budget ?? parseBudgetOptions({}),
    protect: { limit: parseAdaptiveConcurrency({}), retryShare: defaultRetryShare },
  };
}
