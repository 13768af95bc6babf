import { Command, CommanderError } from 'commander';
import { ConfigError } from '../config/env.js';
import { CliUsageError } from './cli-error.js';
import { describeConnectionFailure } from './connection-flag.js';
import { registerCommands } from './commands/index.js';

/**
 * Builds the `requeue` program. Each command lives in `commands/` and
 * registers itself; usage errors exit with code 2 and one line.
 */
export function buildProgram(): Command {
  const program = new Command('requeue')
    .description('A durable job-queue retry scheduler on BullMQ and Redis')
    .version('0.1.0')
    .showSuggestionAfterError(true)
    .exitOverride()
    .configureOutput({
      // One line, even when commander adds a suggestion on a line of its own.
      outputError: (str, write) => write(str.trim().replace(/\s*\n\s*/g, ' ') + '\n'),
    });
  registerCommands(program);
  return program;
}

/** Runs the CLI; returns the process exit code. */
export async function runCli(argv: string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (err) {
    if (err instanceof CommanderError) {
      // --help and --version end here with code 0.
      if (err.exitCode === 0) return 0;
      return 2;
    }
    if (err instanceof CliUsageError || err instanceof ConfigError) {
      process.stderr.write(`requeue: ${err.message}\n`);
      return 2;
    }
    process.stderr.write(
      `requeue: ${err instanceof Error ? describeConnectionFailure(err) : String(err)}\n`,
    );
    return 1;
  }
}
