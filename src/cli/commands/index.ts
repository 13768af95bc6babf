import type { Command } from 'commander';

/** Adds every command to the program. One line per command file. */
export function registerCommands(program: Command): void {
  void program;
}
