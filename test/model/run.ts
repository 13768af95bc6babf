/**
 * `npm run test:model -- [flags] [vitest args]`: runs the model-based suite
 * with vitest.model.config.ts.
 *
 *   --seed S            fast-check seed (default: the clock; printed either way)
 *   --runs N            sequences to try (default 10)
 *   --path P            replay one case of a failure (printed with it)
 *   --replay-path R     the commands' replay path (printed with a failure)
 *   --max-commands N    commands per sequence (default 12)
 *   --without a,b       leave out outcomes (`hang`, `result-bigint`, …) or commands
 *                       (`crash`, `redis-restart`, `adds-during-restart`, `replay`,
 *                       `purge`, `trim`, `breaker`, `status`, `pause`, `add`,
 *                       `reserved-keys`, `skew-clock`), or
 *                       `breaker-config` (workers never get a breaker)
 *   --time-limit MS     stop trying new sequences (and shrinking) after MS
 *   --quiesce-ms MS     how long a run may take to settle (default 20000)
 *   --verbose           print what happened in every run
 *   --monitor DIR       record every Redis command (MONITOR) of each run; a failing
 *                       run's are written to DIR/seed-S-run-N.txt
 *   --consumer-runs N   runs of the consumer model (consumer.model.ts; default: --runs, else 4)
 *   --consumer-time-limit MS  the consumer model's time limit (default 110000)
 *
 * Anything else goes to vitest, e.g. `--reporter=json --outputFile.json=f.json`.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const flags: Record<string, string> = {
  '--seed': 'MODEL_SEED',
  '--runs': 'MODEL_RUNS',
  '--path': 'MODEL_PATH',
  '--replay-path': 'MODEL_REPLAY_PATH',
  '--max-commands': 'MODEL_MAX_COMMANDS',
  '--without': 'MODEL_WITHOUT',
  '--time-limit': 'MODEL_TIME_LIMIT_MS',
  '--quiesce-ms': 'MODEL_QUIESCE_MS',
  '--consumer-runs': 'MODEL_CONSUMER_RUNS',
  '--monitor': 'MODEL_MONITOR',
  '--consumer-time-limit': 'MODEL_CONSUMER_TIME_LIMIT_MS',
};
/** Flags without a value. */
const switches: Record<string, string> = { '--verbose': 'MODEL_VERBOSE' };

const env: Record<string, string> = {};
const rest: string[] = [];
const args = process.argv.slice(2);
for (let i = 0; i < args.length; i += 1) {
  const arg = args[i]!;
  const [name, inline] = arg.includes('=')
    ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)]
    : [arg, undefined];
  if (switches[arg]) {
    env[switches[arg]] = '1';
    continue;
  }
  const variable = flags[name];
  if (!variable) {
    rest.push(arg);
    continue;
  }
  const value = inline ?? args[(i += 1)];
  if (value === undefined) {
    console.error(`test:model: ${name} needs a value`);
    process.exit(2);
  }
  env[variable] = value;
}

const vitest = fileURLToPath(new URL('node_modules/vitest/vitest.mjs', `file://${root}`));
const child = spawn(
  process.execPath,
  [vitest, 'run', '--config', 'vitest.model.config.ts', ...rest],
  { cwd: root, stdio: 'inherit', env: { ...process.env, ...env } },
);
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
