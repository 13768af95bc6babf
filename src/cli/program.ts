import { Command, CommanderError, type Option } from 'commander';
import { ConfigError } from '../config/env.js';
import { parseQueueName } from '../policy/queue-name.js';
import { redactText } from '../util/redact.js';
import { CliUsageError, exitCodes } from './cli-error.js';
import { registerCommands } from './commands/index.js';

/**
 * Builds the `requeue` program. Each command lives in `commands/` and
 * registers itself; usage errors exit with code 2 and one line. Given the
 * command line, only the command it names is loaded.
 */
export async function buildProgram(argv: readonly string[] = []): Promise<Command> {
  const program = new Command('requeue')
    .description('A durable job-queue retry scheduler on BullMQ and Redis')
    .version('0.1.0')
    .showSuggestionAfterError(true)
    .exitOverride()
    .configureHelp({ optionDescription: describeOption })
    .configureOutput({
      // One line, even when commander adds a suggestion on a line of its own.
      outputError: (str, write) => write(str.trim().replace(/\s*\n\s*/g, ' ') + '\n'),
    });
  await registerCommands(program, argv);
  const required = deferRequiredOptions(program);
  // One check of every `<queue>` argument, before any command runs or connects.
  program.hook('preAction', (_program, command) => {
    for (const option of command.options) {
      if (required.has(option) && command.getOptionValue(option.attributeName()) === undefined) {
        command.error(`error: required option '${option.flags}' not specified`, {
          exitCode: 2,
          code: 'commander.missingMandatoryOptionValue',
        });
      }
    }
    checkNotEmpty(command);
    command.registeredArguments.forEach((argument, index) => {
      const value: unknown = command.processedArgs[index];
      // An optional `[queue]` left out (`endpoint list --queue q`) is its command's to default.
      if (argument.name() === 'queue' && (argument.required || value !== undefined))
        parseQueueName(value, '<queue>');
    });
  });
  return program;
}

/**
 * No value given on the command line may be empty: `--id ''` would match no
 * job (or, as a prefix, every one) and say nothing of it. One rule for every
 * option and argument of every command; environment values are the
 * parser's (an empty variable is unset).
 */
function checkNotEmpty(command: Command): void {
  for (const option of command.options) {
    const name = option.attributeName();
    const value: unknown = command.getOptionValue(name);
    if (command.getOptionValueSource(name) === 'cli' && isBlank(value))
      throw new CliUsageError(`${option.long ?? option.flags}: must not be empty`);
  }
  command.registeredArguments.forEach((argument, index) => {
    if (isBlank(command.processedArgs[index]))
      throw new CliUsageError(`<${argument.name()}>: must not be empty`);
  });
}

function isBlank(value: unknown): boolean {
  return typeof value === 'string' && value.trim() === '';
}

/**
 * Commander checks required options before unknown ones, so `enqueue q
 * --dta x` would complain that `--data` is missing rather than name the
 * typo. Required options are marked optional for the parser and checked
 * in `preAction`, after the unknown-option check; the returned set says
 * which.
 */
function deferRequiredOptions(command: Command, required = new Set<Option>()): Set<Option> {
  for (const option of command.options) {
    if (option.mandatory) {
      option.mandatory = false;
      required.add(option);
    }
  }
  for (const sub of command.commands) deferRequiredOptions(sub, required);
  return required;
}

/**
 * An option's help text with its default written one way, `(default: X)`:
 * commander's own (unquoted) and those written into descriptions alike.
 */
function describeOption(option: Option): string {
  const text = option.description.replace(/\(default(?!:)\s*/g, '(default: ');
  const extra: string[] = [];
  if (option.argChoices) extra.push(`choices: ${option.argChoices.join(', ')}`);
  if (option.defaultValue !== undefined && !option.negate) {
    extra.push(`default: ${option.defaultValueDescription ?? String(option.defaultValue)}`);
  }
  if (option.envVar !== undefined) extra.push(`env: ${option.envVar}`);
  return extra.length > 0 ? `${text} (${extra.join(', ')})` : text;
}

/** Runs the CLI; returns the process exit code. */
export async function runCli(argv: string[]): Promise<number> {
  const program = await buildProgram(argv);
  try {
    await program.parseAsync(argv);
    return typeof process.exitCode === 'number' ? process.exitCode : exitCodes.ok;
  } catch (err) {
    if (err instanceof CommanderError) {
      // --help and --version end here with code 0.
      if (err.exitCode === 0) return exitCodes.ok;
      return exitCodes.failed;
    }
    if (err instanceof CliUsageError || err instanceof ConfigError) {
      process.stderr.write(`requeue: ${redactText(err.message)}\n`);
      return exitCodes.failed;
    }
    // Loaded here, not up front: it brings ioredis, which most commands never need.
    const { describeConnectionFailure } = await import('./connection-flag.js');
    // A client error may quote a URL with its password, or a command's arguments: redacted.
    process.stderr.write(
      `requeue: ${redactText(err instanceof Error ? describeConnectionFailure(err) : String(err))}\n`,
    );
    // Whatever stopped the command (Redis gone mid-way, MOVED, a refused
    // command) is the same code as not reaching it: 1 is kept for findings.
    return exitCodes.failed;
  }
}
