import { spawnSync } from 'node:child_process';
import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { completionScript, completionShells } from '../../src/cli/completion.js';
import { buildProgram } from '../../src/cli/program.js';
import { repoRoot } from '../harness/child.js';

/** Every command path of the program (`dlq replay`) with its long options, walked here on its own. */
function everyCommand(command: Command, path = ''): { path: string; options: string[] }[] {
  return command.commands.flatMap((sub) => {
    const subPath = path === '' ? sub.name() : `${path} ${sub.name()}`;
    const options = sub.options.flatMap((option) => (option.long ? [option.long] : []));
    return [{ path: subPath, options }, ...everyCommand(sub, subPath)];
  });
}

/** What bash completes for `words` (the last one being typed), with the script sourced. */
function bashCompletes(script: string, words: string[]): string[] {
  const result = spawnSync(
    'bash',
    [
      '-c',
      'eval "$SCRIPT"; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _requeue; printf "%s\\n" "${COMPREPLY[@]}"',
      'bash',
      ...words,
    ],
    { encoding: 'utf8', env: { ...process.env, SCRIPT: script } },
  );
  expect(result.stderr).toBe('');
  return result.stdout.split('\n').filter((line) => line !== '');
}

describe('requeue completion bash|zsh|fish', () => {
  it('every command, subcommand and option of the program is in each shell’s script', async () => {
    const program = await buildProgram();
    const commands = everyCommand(program);
    expect(commands.map((command) => command.path)).toEqual(
      expect.arrayContaining(['worker', 'queues', 'dlq replay', 'breaker close', 'completion']),
    );
    for (const shell of completionShells) {
      const script = completionScript(program, shell);
      for (const { path, options } of commands) {
        const line = script.split('\n').findIndex((text) => text.includes(`'${path}'`));
        expect(line, `${shell}: ${path}`).toBeGreaterThanOrEqual(0);
        const words = script.split('\n')[line + (shell === 'fish' ? 1 : 0)]!;
        for (const option of options)
          expect(words, `${shell}: ${path} ${option}`).toContain(option);
      }
    }
  });

  it('bash completes commands, subcommands and options where they are typed', async () => {
    const script = completionScript(await buildProgram(), 'bash');
    expect(bashCompletes(script, ['requeue', 'dl'])).toEqual(['dlq']);
    expect(bashCompletes(script, ['requeue', 'dlq', 're'])).toEqual(['replay']);
    expect(bashCompletes(script, ['requeue', 'dlq', 'replay', 'orders', '--al'])).toEqual([
      '--all',
    ]);
    expect(bashCompletes(script, ['requeue', '--redis', 'redis://x', 'breaker', 'cl'])).toEqual([
      'close',
    ]);
    expect(bashCompletes(script, ['requeue', 'completion', ''])).toEqual(
      expect.arrayContaining(['bash', 'zsh', 'fish']),
    );
  });

  it('the CLI prints the script, and refuses an unknown shell with exit 2', () => {
    const run = (shell: string) =>
      spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'completion', shell], {
        cwd: repoRoot,
        encoding: 'utf8',
        timeout: 60_000,
      });
    const bash = run('bash');
    expect(bash.status).toBe(0);
    expect(bash.stdout).toContain('complete -o default -F _requeue requeue');
    expect(bash.stdout).toContain("'dlq replay')");
    const tcsh = run('tcsh');
    expect(tcsh.status).toBe(2);
    expect(tcsh.stderr).toContain('Allowed choices are bash, zsh, fish');
  });
});
