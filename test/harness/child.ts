import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** The package root: child processes run from here so relative paths resolve. */
export const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

/** How a child process ended. */
export interface ChildExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A TypeScript child process started with tsx. */
export interface TsChild {
  readonly proc: ChildProcess;
  /** Resolves when the process has exited. */
  readonly exited: Promise<ChildExit>;
  /** What it wrote to stdout and stderr so far. */
  stdout(): string;
  stderr(): string;
  /** Sends `signal` (unless it has already exited) and waits for the exit. */
  kill(signal?: NodeJS.Signals): Promise<ChildExit>;
}

/**
 * Runs `node --import tsx <script> ...args` from the package root with `env`
 * added to this process's environment.
 */
export function spawnTs(
  script: string,
  args: readonly string[] = [],
  env: Record<string, string> = {},
): TsChild {
  const proc = spawn(process.execPath, ['--import', 'tsx', script, ...args], {
    cwd: repoRoot,
    env: { ...process.env, LOG_LEVEL: 'silent', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  proc.stdout?.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  proc.stderr?.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
  const exited = new Promise<ChildExit>((resolve, reject) => {
    proc.once('error', reject);
    proc.once('close', (code, signal) => resolve({ code, signal }));
  });
  return {
    proc,
    exited,
    stdout: () => out,
    stderr: () => err,
    kill: async (signal = 'SIGKILL') => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      return exited;
    },
  };
}

/** The result of a command run to its end. */
export interface CommandResult extends ChildExit {
  stdout: string;
  stderr: string;
}

/** Runs a TypeScript script to its end; kills it (and fails) after `timeoutMs`. */
export async function runTs(
  script: string,
  args: readonly string[],
  env: Record<string, string> = {},
  timeoutMs = 20_000,
): Promise<CommandResult> {
  const child = spawnTs(script, args, env);
  const timer = setTimeout(() => child.proc.kill('SIGKILL'), timeoutMs);
  try {
    const exit = await child.exited;
    if (exit.signal === 'SIGKILL') {
      throw new Error(
        `${script} ${args.join(' ')} did not finish within ${timeoutMs} ms; stderr ends:\n` +
          child.stderr().slice(-500),
      );
    }
    return { ...exit, stdout: child.stdout(), stderr: child.stderr() };
  } finally {
    clearTimeout(timer);
  }
}
