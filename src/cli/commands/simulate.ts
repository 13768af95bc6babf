import type { Command } from 'commander';
import { ConfigError } from '../../errors/config-error.js';
import { parseBreakerOptions, type BreakerOptions } from '../../policy/breaker/breaker-options.js';
import { parseBudgetOptions, type BudgetOptions } from '../../policy/budget/budget-options.js';
import { retryPolicySchema, type RetryPolicy } from '../../policy/retry-policy.js';
import {
  simulateContention,
  type ContentionParams,
  type ContentionResult,
} from '../../policy/simulate/contention.js';
import {
  recoveryOkFraction,
  recoveryWindowS,
  simulateOutage,
  type OutageParams,
  type OutageResult,
} from '../../policy/simulate/outage.js';
import {
  isSimStrategy,
  simStrategies,
  type SimStrategy,
} from '../../policy/simulate/sim-strategy.js';
import { checkContentionWork, checkOutageWork } from '../../policy/simulate/work-bound.js';
import { CliUsageError, parseJsonFlag, parseNumberFlag } from '../cli-error.js';
import { formatTable } from '../table.js';
import { describeIssues, formatMs } from './plan.js';

type Scenario = 'contention' | 'outage';

interface SimulateFlags {
  scenario?: string;
  clients?: string;
  trials?: string;
  seed: string;
  strategies?: string;
  baseMs?: string;
  capMs?: string;
  factor?: string;
  jitter?: string;
  randomMs?: string;
  netMeanMs?: string;
  netSdMs?: string;
  meanGapMs?: string;
  timeoutMs?: string;
  backlog?: string;
  stopAtMs?: string;
  stopForMs?: string;
  durationMs?: string;
  minDelayMs?: string;
  concurrencyLimit?: string;
  latencyFactor?: string;
  latencyK?: string;
  breaker?: string;
  budget?: string;
  json?: boolean;
  svg?: string;
}

/** Each scenario's own flags, with their defaults: the other scenario refuses them. */
const contentionDefaults = { clients: 100, trials: 100, netMeanMs: 10, netSdMs: 2 };
const outageDefaults = {
  clients: 1000,
  meanGapMs: 10_000,
  timeoutMs: 2000,
  backlog: 1024,
  stopAtMs: 15_000,
  stopForMs: 20_000,
  durationMs: 180_000,
  minDelayMs: 100,
  concurrencyLimit: 30,
  latencyFactor: 1.05,
  latencyK: 15,
};
/** The clients' backoff options by scenario: the AWS study's, and seed 004's. */
const policyDefaults: Record<Scenario, Partial<RetryPolicy>> = {
  contention: { baseMs: 5, capMs: 2000 },
  outage: { baseMs: 100, capMs: 300_000, factor: 2.718, jitter: 0.1 },
};

const contentionOnly = ['trials', 'netMeanMs', 'netSdMs'] as const;
const outageOnly = [
  'meanGapMs',
  'timeoutMs',
  'backlog',
  'stopAtMs',
  'stopForMs',
  'durationMs',
  'minDelayMs',
  'concurrencyLimit',
  'latencyFactor',
  'latencyK',
  'breaker',
  'budget',
] as const;
const policyFields = ['baseMs', 'capMs', 'factor', 'jitter', 'randomMs'] as const;

const maxClients: Record<Scenario, number> = { contention: 10_000, outage: 200_000 };
const maxTrials = 100_000;
const maxDurationMs = 3_600_000;

/** Flag name of a field: `stopAtMs` → `--stop-at-ms`. */
const flagOf = (field: string): string =>
  `--${field.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;

/**
 * Registers `requeue simulate`: a seeded discrete-event simulation, in
 * virtual time, of many clients retrying by the workers' own strategies
 * (and, in the outage, the workers' breaker and budget).
 */
export function registerSimulate(program: Command): void {
  const o = outageDefaults;
  program
    .command('simulate')
    .description(
      'Simulate many clients retrying against one dependency: contention (the AWS jitter study) or outage (seed 004)',
    )
    .option('--scenario <name>', 'contention or outage (required)')
    .option(
      '--clients <n>',
      `clients (default ${contentionDefaults.clients} for contention, ${o.clients} for outage)`,
    )
    .option('--trials <n>', `contention: runs averaged (default ${contentionDefaults.trials})`)
    .option('--seed <n>', 'random seed: the same seed gives the same figures', '7')
    .option('--strategies <list>', `comma-separated, of ${simStrategies.join(', ')} (default all)`)
    .option('--base-ms <ms>', 'first delay (default 5 for contention, 100 for outage)')
    .option('--cap-ms <ms>', 'longest delay (default 2000 for contention, 300000 for outage)')
    .option('--factor <f>', 'growth per retry (default 2 for contention, 2.718 for outage)')
    .option('--jitter <j>', 'normal-jitter deviation as a fraction of the delay (default 0.1)')
    .option('--random-ms <ms>', 'google: width of the random term (default 1000)')
    .option(
      '--net-mean-ms <ms>',
      `contention: mean network delay per message (default ${contentionDefaults.netMeanMs})`,
    )
    .option(
      '--net-sd-ms <ms>',
      `contention: its standard deviation (default ${contentionDefaults.netSdMs})`,
    )
    .option(
      '--mean-gap-ms <ms>',
      `outage: mean gap between a client's requests (default ${o.meanGapMs})`,
    )
    .option('--timeout-ms <ms>', `outage: client timeout (default ${o.timeoutMs})`)
    .option('--backlog <n>', `outage: connections a stopped server queues (default ${o.backlog})`)
    .option('--stop-at-ms <ms>', `outage: when the server stops (default ${o.stopAtMs})`)
    .option('--stop-for-ms <ms>', `outage: for how long (default ${o.stopForMs})`)
    .option('--duration-ms <ms>', `outage: the run's length (default ${o.durationMs})`)
    .option(
      '--min-delay-ms <ms>',
      `outage: server latency under the limit (default ${o.minDelayMs})`,
    )
    .option(
      '--concurrency-limit <n>',
      `outage: concurrency the server takes at min delay (default ${o.concurrencyLimit})`,
    )
    .option(
      '--latency-factor <f>',
      `outage: latency growth beyond the limit (default ${o.latencyFactor})`,
    )
    .option(
      '--latency-k <n>',
      `outage: extra requests per factor of latency (default ${o.latencyK})`,
    )
    .option('--breaker <json>', "outage: the workers' circuit breaker options, e.g. '{}'")
    .option('--budget <json>', "outage: the workers' retry budget options, e.g. '{}'")
    .option('--json', 'print one JSON object, in milliseconds')
    .option('--svg <file>', 'also write a plot to this SVG file')
    .action(async (flags: SimulateFlags) => {
      const scenario = parseScenario(flags);
      const strategies = parseStrategies(flags.strategies);
      const seed = parseNumberFlag('--seed', flags.seed, { integer: true });
      const policy = policyFromFlags(flags, scenario);
      let output: string;
      let svg: (() => Promise<string>) | undefined;
      if (scenario === 'contention') {
        const params = contentionParams(flags, seed, policy);
        checkContentionWork(params, strategies.length, flagOf);
        const results = simulateContention(strategies, params);
        output = flags.json ? contentionJson(params, results) : contentionTable(params, results);
        svg = async () => (await import('../simulate-svg.js')).contentionSvg(params, results);
      } else {
        const params = outageParams(flags, seed, policy);
        checkOutageWork(params, strategies.length, flagOf);
        const results = simulateOutage(strategies, params);
        output = flags.json ? outageJson(params, results) : outageTable(params, results);
        svg = async () => (await import('../simulate-svg.js')).outageSvg(params, results);
      }
      if (flags.svg !== undefined) {
        const { writeFile } = await import('node:fs/promises');
        await writeFile(flags.svg, await svg());
      }
      process.stdout.write(output);
    });
}

function parseScenario(flags: SimulateFlags): Scenario {
  const { scenario } = flags;
  if (scenario === undefined)
    throw new CliUsageError('--scenario: required (contention or outage)');
  if (scenario !== 'contention' && scenario !== 'outage')
    throw new CliUsageError(`--scenario: expected contention or outage, got "${scenario}"`);
  const foreign = scenario === 'contention' ? outageOnly : contentionOnly;
  for (const field of foreign) {
    if (flags[field] === undefined) continue;
    const other = scenario === 'contention' ? 'outage' : 'contention';
    const hint =
      field === 'trials' ? ' (the outage runs once per strategy; vary --seed for another run)' : '';
    throw new CliUsageError(`${flagOf(field)}: only for --scenario ${other}${hint}`);
  }
  return scenario;
}

function parseStrategies(list: string | undefined): SimStrategy[] {
  if (list === undefined) return [...simStrategies];
  const names = list.split(',').map((name) => name.trim());
  const chosen: SimStrategy[] = [];
  for (const name of names) {
    if (!isSimStrategy(name))
      throw new CliUsageError(
        `--strategies: unknown strategy "${name}" (one of ${simStrategies.join(', ')})`,
      );
    if (!chosen.includes(name)) chosen.push(name);
  }
  return chosen;
}

/** The clients' backoff options, validated by the workers' own schema so errors name the flag. */
function policyFromFlags(flags: SimulateFlags, scenario: Scenario): RetryPolicy {
  const input: Record<string, unknown> = { ...policyDefaults[scenario] };
  for (const field of policyFields) {
    const value = flags[field];
    if (value !== undefined) input[field] = parseNumberFlag(flagOf(field), value);
  }
  const result = retryPolicySchema.safeParse(input);
  if (!result.success) throw new CliUsageError(describeIssues(result.error));
  return result.data;
}

/** A numeric flag of a scenario, its default when left out. */
function numberOf(
  flags: SimulateFlags,
  field: keyof SimulateFlags,
  fallback: number,
  rule: { integer?: boolean; min?: number; above?: number; max?: number } = {},
): number {
  const raw = flags[field];
  if (raw === undefined || typeof raw !== 'string') return fallback;
  const flag = flagOf(field);
  const n = parseNumberFlag(flag, raw, {
    integer: rule.integer ?? false,
    min: rule.min ?? -Infinity,
  });
  if (rule.above !== undefined && !(n > rule.above))
    throw new CliUsageError(`${flag}: must be > ${rule.above}, got ${raw}`);
  if (rule.max !== undefined && n > rule.max)
    throw new CliUsageError(`${flag}: must be ≤ ${rule.max}, got ${raw}`);
  return n;
}

function contentionParams(
  flags: SimulateFlags,
  seed: number,
  policy: RetryPolicy,
): ContentionParams {
  const d = contentionDefaults;
  return {
    clients: numberOf(flags, 'clients', d.clients, {
      integer: true,
      min: 1,
      max: maxClients.contention,
    }),
    trials: numberOf(flags, 'trials', d.trials, { integer: true, min: 1, max: maxTrials }),
    seed,
    netMeanMs: numberOf(flags, 'netMeanMs', d.netMeanMs, { min: 0 }),
    netSdMs: numberOf(flags, 'netSdMs', d.netSdMs, { min: 0 }),
    policy,
  };
}

function outageParams(flags: SimulateFlags, seed: number, policy: RetryPolicy): OutageParams {
  const d = outageDefaults;
  const stopAtMs = numberOf(flags, 'stopAtMs', d.stopAtMs, { min: 0 });
  const stopForMs = numberOf(flags, 'stopForMs', d.stopForMs, { min: 0 });
  const durationMs = numberOf(flags, 'durationMs', d.durationMs, { min: 1000, max: maxDurationMs });
  if (stopAtMs + stopForMs >= durationMs)
    throw new CliUsageError(
      `--duration-ms: must be longer than --stop-at-ms + --stop-for-ms (${stopAtMs + stopForMs}), got ${durationMs}`,
    );
  return {
    clients: numberOf(flags, 'clients', d.clients, {
      integer: true,
      min: 1,
      max: maxClients.outage,
    }),
    seed,
    meanGapMs: numberOf(flags, 'meanGapMs', d.meanGapMs, { above: 0 }),
    timeoutMs: numberOf(flags, 'timeoutMs', d.timeoutMs, { above: 0 }),
    stopAtMs,
    stopForMs,
    durationMs,
    server: {
      minDelayMs: numberOf(flags, 'minDelayMs', d.minDelayMs, { above: 0 }),
      concurrencyLimit: numberOf(flags, 'concurrencyLimit', d.concurrencyLimit, {
        integer: true,
        min: 0,
      }),
      latencyFactor: numberOf(flags, 'latencyFactor', d.latencyFactor, { min: 1 }),
      latencyK: numberOf(flags, 'latencyK', d.latencyK, { above: 0 }),
      backlog: numberOf(flags, 'backlog', d.backlog, { integer: true, min: 0 }),
    },
    policy,
    breaker: flags.breaker === undefined ? undefined : breakerFrom(flags.breaker),
    budget: flags.budget === undefined ? undefined : budgetFrom(flags.budget),
  };
}

/** The workers' breaker options, parsed by the workers' parser; errors name the flag. */
function breakerFrom(raw: string): BreakerOptions {
  return withFlag('--breaker', () => parseBreakerOptions(parseJsonFlag('--breaker', raw)));
}

function budgetFrom(raw: string): BudgetOptions {
  return withFlag('--budget', () => parseBudgetOptions(parseJsonFlag('--budget', raw)));
}

function withFlag<T>(flag: string, parse: () => T): T {
  try {
    return parse();
  } catch (err) {
    if (err instanceof ConfigError) throw new CliUsageError(`${flag}: ${err.message}`);
    throw err;
  }
}

const round = (n: number, places: number): number => Math.round(n * 10 ** places) / 10 ** places;

function policyParams(policy: RetryPolicy) {
  const { baseMs, capMs, factor, jitter, randomMs } = policy;
  return { baseMs, capMs, factor, jitter, randomMs };
}

function contentionJson(params: ContentionParams, results: ContentionResult[]): string {
  const { clients, trials, seed, netMeanMs, netSdMs, policy } = params;
  return `${JSON.stringify(
    {
      scenario: 'contention',
      params: { clients, trials, seed, netMeanMs, netSdMs, ...policyParams(policy) },
      strategies: results.map((r) => ({
        strategy: r.strategy,
        calls: round(r.calls, 2),
        timeMs: round(r.timeMs, 3),
      })),
    },
    null,
    2,
  )}\n`;
}

/** The outage's parameters as given, the server's flattened, breaker and budget `null` when off. */
function outageParamsJson(params: OutageParams) {
  const { clients, seed, meanGapMs, timeoutMs, stopAtMs, stopForMs, durationMs, server } = params;
  return {
    clients,
    seed,
    meanGapMs,
    timeoutMs,
    stopAtMs,
    stopForMs,
    durationMs,
    ...server,
    ...policyParams(params.policy),
    breaker: params.breaker ?? null,
    budget: params.budget ?? null,
  };
}

function outageJson(params: OutageParams, results: OutageResult[]): string {
  return `${JSON.stringify(
    {
      scenario: 'outage',
      params: outageParamsJson(params),
      strategies: results.map((r) => ({
        strategy: r.strategy,
        recovered: r.recovered,
        recoveryMs: r.recoveryMs,
        peakConcurrency: r.peakConcurrency,
        perSecond: r.perSecond,
      })),
    },
    null,
    2,
  )}\n`;
}

function contentionTable(params: ContentionParams, results: ContentionResult[]): string {
  const { clients, trials, seed, netMeanMs, netSdMs, policy } = params;
  const lines = [
    `contention: ${clients} clients race to write one row, ${trials} trials (seed ${seed}); ` +
      `each message |normal(${netMeanMs}ms, ${netSdMs}ms)|; backoff baseMs=${policy.baseMs} ` +
      `capMs=${policy.capMs} factor=${policy.factor}; means per trial`,
  ];
  const rows = results.map((r) => [
    r.strategy,
    r.calls.toFixed(1),
    (r.calls / clients).toFixed(2),
    formatMs(r.timeMs),
  ]);
  lines.push(formatTable(['strategy', 'calls', 'per client', 'time'], rows).trimEnd());
  if (results.length > 1) {
    const leastWork = results.reduce((a, b) => (b.calls < a.calls ? b : a));
    const fastest = results.reduce((a, b) => (b.timeMs < a.timeMs ? b : a));
    lines.push(
      `least work: ${leastWork.strategy} (${leastWork.calls.toFixed(1)} calls); ` +
        `first done: ${fastest.strategy} (${formatMs(fastest.timeMs)})`,
    );
  }
  return `${lines.join('\n')}\n`;
}

const sum = (values: readonly number[]): number => values.reduce((a, b) => a + b, 0);

function outageTable(params: OutageParams, results: OutageResult[]): string {
  const { clients, seed, meanGapMs, timeoutMs, stopAtMs, stopForMs, durationMs, server, policy } =
    params;
  const extras = [
    params.breaker ? `breaker ${JSON.stringify(params.breaker)}` : '',
    params.budget ? `budget ${JSON.stringify(params.budget)}` : '',
  ].filter(Boolean);
  const lines = [
    `outage: ${clients} clients, a request every ${formatMs(meanGapMs)} on average each, timeout ${formatMs(timeoutMs)} (seed ${seed}); ` +
      `server ${server.minDelayMs}ms up to ${server.concurrencyLimit} in flight, ×${server.latencyFactor} per ${server.latencyK} more, backlog ${server.backlog}; ` +
      `stopped at ${formatMs(stopAtMs)} for ${formatMs(stopForMs)}, run ${formatMs(durationMs)}; ` +
      `backoff baseMs=${policy.baseMs} capMs=${policy.capMs} factor=${policy.factor} jitter=${policy.jitter}`,
  ];
  if (extras.length > 0) lines.push(`with ${extras.join(' and ')}`);
  const rows = results.map((r) => {
    const last = r.perSecond.slice(-recoveryWindowS);
    return [
      r.strategy,
      r.recovered ? 'yes' : 'no',
      r.recoveryMs === null ? '-' : formatMs(r.recoveryMs),
      String(r.peakConcurrency),
      r.baselineOkPerSecond.toFixed(1),
      (sum(last.map((s) => s.ok)) / Math.max(1, last.length)).toFixed(1),
      String(sum(r.perSecond.map((s) => s.timeouts))),
      String(sum(r.perSecond.map((s) => s.errors))),
      String(r.calls),
    ];
  });
  lines.push(
    formatTable(
      [
        'strategy',
        'recovered',
        'after',
        'peak conc',
        'ok/s before',
        `ok/s last ${recoveryWindowS}s`,
        'timeouts',
        'refused',
        'calls',
      ],
      rows,
    ).trimEnd(),
  );
  lines.push(
    `recovered: ok/s ≥ ${recoveryOkFraction * 100}% of before and concurrency ≤ ${server.concurrencyLimit} for ${recoveryWindowS}s in a row; ` +
      `"after" counts from the resume; "refused": requests the breaker turned away`,
  );
  // The timeline, 10 s a row: mean ok/s and the highest concurrency, strategy by strategy.
  const step = 10;
  const timeline: string[][] = [];
  const seconds = results[0]?.perSecond.length ?? 0;
  for (let t = 0; t < seconds; t += step) {
    const row = [String(t)];
    for (const r of results) {
      const block = r.perSecond.slice(t, t + step);
      const ok = sum(block.map((s) => s.ok)) / block.length;
      const conc = Math.max(...block.map((s) => s.concurrency));
      row.push(`${ok.toFixed(0)} / ${conc}`);
    }
    timeline.push(row);
  }
  lines.push('');
  lines.push(
    `timeline: ok/s (mean over ${step}s) / peak concurrency; the server is down from ${stopAtMs / 1000}s to ${(stopAtMs + stopForMs) / 1000}s`,
  );
  lines.push(formatTable(['t (s)', ...results.map((r) => r.strategy)], timeline).trimEnd());
  return `${lines.join('\n')}\n`;
}
