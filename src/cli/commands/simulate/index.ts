import type { Command } from 'commander';
import { isSimStrategy, simStrategies, type SimStrategy } from '../../../simulate/sim-strategy.js';
import { CliUsageError, parseNumberFlag } from '../../cli-error.js';
import { flagOf } from '../plan.js';
import { contentionFlags, runContention } from './contention.js';
import { registerScenarioFlags, scenariosWith, type ScenarioSchema } from './flags.js';
import { fairnessFlags, runFairness } from './fairness.js';
import { outageFlags, runOutage } from './outage.js';
import type { ScenarioRun } from './scenario.js';

/** Each scenario: its flags (one zod schema) and its run. */
const scenarios = {
  contention: { flags: contentionFlags, run: runContention },
  outage: { flags: outageFlags, run: runOutage },
  fairness: { flags: fairnessFlags, run: runFairness },
} satisfies Record<
  string,
  {
    flags: ScenarioSchema;
    run: (
      flags: Record<string, unknown>,
      seed: number,
      strategies: SimStrategy[] | undefined,
      json: boolean,
    ) => Promise<ScenarioRun>;
  }
>;
type Scenario = keyof typeof scenarios;
const scenarioNames = Object.keys(scenarios) as Scenario[];
const schemas: Record<string, ScenarioSchema> = Object.fromEntries(
  scenarioNames.map((name) => [name, scenarios[name].flags]),
);

/** The flags every scenario takes. */
interface CommonFlags {
  scenario?: string;
  seed: string;
  strategies?: string;
  json?: boolean;
  svg?: string;
}

/**
 * Registers `requeue simulate`: a seeded discrete-event simulation, in
 * virtual time, of many clients retrying by the workers' own strategies
 * (and, in the outage, the workers' breaker and budget).
 */
export function registerSimulate(program: Command): void {
  const command = program
    .command('simulate')
    .description(
      'Simulate many clients retrying against one dependency: contention (the AWS jitter study) or outage (seed 004); or keys sharing a worker pool: fairness',
    )
    .option('--scenario <name>', `${scenarioNames.join(' or ')} (required)`)
    .option('--seed <n>', 'random seed: the same seed gives the same figures', '7')
    .option(
      '--strategies <list>',
      `comma-separated, of ${simStrategies.join(', ')} (default all; fixed, exponential for --client seed004)`,
    );
  registerScenarioFlags(command, schemas);
  command
    .option('--json', 'print one JSON object, in milliseconds')
    .option('--svg <file>', 'also write a plot to this SVG file')
    .action(async (flags: CommonFlags & Record<string, unknown>) => {
      const scenario = parseScenario(flags);
      const strategies = parseStrategies(flags.strategies);
      const seed = parseNumberFlag('--seed', flags.seed, { integer: true });
      const run = await scenarios[scenario].run(flags, seed, strategies, flags.json === true);
      if (flags.svg !== undefined) {
        const { writeFile } = await import('node:fs/promises');
        await writeFile(flags.svg, await run.svg());
      }
      process.stdout.write(run.output);
    });
}

function parseScenario(flags: CommonFlags & Record<string, unknown>): Scenario {
  const { scenario } = flags;
  const names = scenarioNames.join(' or ');
  if (scenario === undefined) throw new CliUsageError(`--scenario: required (${names})`);
  if (!(scenarioNames as string[]).includes(scenario))
    throw new CliUsageError(`--scenario: expected ${names}, got "${scenario}"`);
  const chosen = scenario as Scenario;
  // A flag of another scenario is refused, not ignored.
  for (const [name, schema] of Object.entries(schemas)) {
    if (name === chosen) continue;
    for (const field of Object.keys(schema.shape)) {
      if (flags[field] === undefined || field in scenarios[chosen].flags.shape) continue;
      const owners = scenariosWith(schemas, field);
      const hint =
        field === 'trials'
          ? ' (the outage runs once per strategy; vary --seed for another run)'
          : '';
      throw new CliUsageError(
        `${flagOf(field)}: only for --scenario ${owners.join(' or ')}${hint}`,
      );
    }
  }
  return chosen;
}

/** The strategies asked for; undefined for the scenario's default (all it can run). */
function parseStrategies(list: string | undefined): SimStrategy[] | undefined {
  if (list === undefined) return undefined;
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
