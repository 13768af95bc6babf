import { Argument, type Command } from 'commander';
import { completionScript, completionShells, type CompletionShell } from '../completion.js';

/** `requeue completion bash|zsh|fish`: prints the shell's completion script. */
export function registerCompletion(program: Command): void {
  program
    .command('completion')
    .description(
      'Print a shell completion script (bash: source <(requeue completion bash); fish: requeue completion fish | source)',
    )
    .addArgument(new Argument('<shell>', 'the shell').choices(completionShells))
    .action((shell: CompletionShell) => {
      process.stdout.write(completionScript(program, shell));
    });
}
