import type { Command } from 'commander';

/** The shells `requeue completion` writes a script for. */
export const completionShells = ['bash', 'zsh', 'fish'] as const;
export type CompletionShell = (typeof completionShells)[number];

/**
 * What may follow each command path: `''` is the program itself, `'dlq'` the
 * `dlq` group, `'dlq list'` its `list` command. Read from the program's own
 * command tree each time a script is written, so completion cannot drift from
 * the commands.
 */
export function completionTable(program: Command): Map<string, string[]> {
  const table = new Map<string, string[]>();
  const walk = (command: Command, path: string): void => {
    const subs = command.commands.filter((sub) => sub.name() !== 'help');
    const options = command.options.flatMap((option) =>
      option.long !== undefined ? [option.long] : [],
    );
    const help = command.commands.length > 0 || command === program ? ['help'] : [];
    const choices = command.registeredArguments.flatMap((argument) => argument.argChoices ?? []);
    const words = [...subs.map((sub) => sub.name()), ...help, ...choices, ...options, '--help'];
    table.set(path, [...new Set(words)]);
    for (const sub of subs) walk(sub, path === '' ? sub.name() : `${path} ${sub.name()}`);
  };
  walk(program, '');
  return table;
}

/** The script for `shell` that completes `program`'s commands and options. */
export function completionScript(program: Command, shell: CompletionShell): string {
  const table = completionTable(program);
  const name = program.name();
  const fn = `_${name.replace(/[^A-Za-z0-9_]/g, '_')}`;
  const cases = [...table]
    .map(([path, words]) => `    '${path}') echo '${words.join(' ')}' ;;`)
    .join('\n');
  const fishCases = [...table]
    .map(([path, words]) => `    case '${path}'\n        echo '${words.join(' ')}'`)
    .join('\n');
  switch (shell) {
    case 'bash':
      return `# ${name} completion for bash: source <(${name} completion bash)
${fn}_words() {
  case "$1" in
${cases}
  esac
}
${fn}() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" cmdpath="" w i
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    [[ "$w" == -* ]] && continue
    [[ " $(${fn}_words "$cmdpath") " == *" $w "* ]] && cmdpath="\${cmdpath:+$cmdpath }$w"
  done
  COMPREPLY=($(compgen -W "$(${fn}_words "$cmdpath")" -- "$cur"))
}
complete -o default -F ${fn} ${name}
`;
    case 'zsh':
      return `#compdef ${name}
# ${name} completion for zsh: source <(${name} completion zsh)   (after compinit)
${fn}_words() {
  case "$1" in
${cases}
  esac
}
${fn}() {
  local cmdpath="" w i
  for ((i = 2; i < CURRENT; i++)); do
    w="\${words[i]}"
    [[ "$w" == -* ]] && continue
    [[ " $(${fn}_words "$cmdpath") " == *" $w "* ]] && cmdpath="\${cmdpath:+$cmdpath }$w"
  done
  compadd -- \${=$(${fn}_words "$cmdpath")}
  _files
}
compdef ${fn} ${name}
`;
    case 'fish':
      return `# ${name} completion for fish: ${name} completion fish | source
function __${fn}_words
    switch "$argv"
${fishCases}
    end
end
function __${fn}_complete
    set -l cmdpath ''
    for w in (commandline -opc)[2..-1]
        string match -q -- '-*' $w; and continue
        if contains -- $w (string split ' ' (__${fn}_words $cmdpath))
            set cmdpath (string trim -- "$cmdpath $w")
        end
    end
    string split ' ' (__${fn}_words $cmdpath)
end
complete -c ${name} -a '(__${fn}_complete)'
`;
  }
}
